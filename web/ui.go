package web

import (
	"embed"
	"io/fs"
	"net/http"
)

// uiFiles is the browser client (web/ui): plain HTML, CSS and JS served
// as they are, so no build step stands between an edit and a reload.
//
//go:embed ui
var uiFiles embed.FS

// mountUI serves the page at / and each of its files beside it. Exact
// routes rather than a catch-all "GET /", which would conflict with the
// method-less /v1/ mount.
func mountUI(mux *http.ServeMux) error {
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		return err
	}
	files := http.FileServerFS(sub)
	serve := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Small files that change with the binary: revalidate every load.
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
	entries, err := fs.ReadDir(sub, ".")
	if err != nil {
		return err
	}
	mux.Handle("GET /{$}", serve)
	for _, e := range entries {
		if !e.IsDir() && e.Name() != "index.html" { // FileServer redirects /index.html to /
			mux.Handle("GET /"+e.Name(), serve)
		}
	}
	return nil
}
