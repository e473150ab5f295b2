package access

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"
)

// FuzzCredentials: whatever a client sends as its Authorization header,
// token and Origin, nothing panics and nothing but the key or a minted
// token gets in.
func FuzzCredentials(f *testing.F) {
	g := New(Config{Keys: []string{"the-key"}, TokenTTL: time.Minute})
	good := g.mint(time.Now().Add(time.Minute))
	f.Add("Bearer the-key", "", "")
	f.Add("bearer "+good, good, "http://example.com")
	f.Add("Basic abc", good[:10], "null")
	f.Add("Bearer ", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "://")
	h := g.Protect(Session, teapot, nil)
	f.Fuzz(func(t *testing.T, auth, token, origin string) {
		r := httptest.NewRequest("GET", "/ws?token="+url.QueryEscape(token), nil)
		r.Header.Set("Authorization", auth)
		r.Header.Set("Origin", origin)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusTeapot {
			return
		}
		if !g.keyOK(r) && token != good && bearer(r) != good {
			t.Fatalf("let in auth %q token %q", auth, token)
		}
	})
}
