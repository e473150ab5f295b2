// Package store is the knowledge base's index (llm/knowledge): passages
// from folders of documents and the bundled dictionary, indexed with bleve
// (BM25), cached on disk, and searched with a query-independent rerank.
package store

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/voxpipe/voxpipe/llm/knowledge"
)

// Dictionary is the source name of the bundled dictionary (WordNet, FOLDOC,
// the Jargon File from Debian's packages).
const Dictionary = "dictionary"

// ErrSource is wrapped by every error about a source's content.
var ErrSource = errors.New("knowledge: bad source")

// formatVersion is part of the fingerprint: bump it when parsing, the index
// mapping or the stored fields change, so old caches are rebuilt.
const formatVersion = "voxpipe-knowledge-2"

// docExts are the file types a folder source reads.
var docExts = map[string]bool{".txt": true, ".md": true, ".jsonl": true}

// sourceFiles lists the files behind sources: a folder's .txt/.md/.jsonl
// files (recursively, sorted) or the dictionary's package files.
func sourceFiles(sources []string) ([]string, error) {
	var out []string
	for _, src := range sources {
		if src == Dictionary {
			out = append(out, dictionaryFiles()...)
			continue
		}
		st, err := os.Stat(src)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSource, err)
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("%w: %s is not a folder (a source is a folder of .txt/.md/.jsonl files or %q)", ErrSource, src, Dictionary)
		}
		var files []string
		err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && docExts[strings.ToLower(filepath.Ext(p))] {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSource, err)
		}
		sort.Strings(files)
		out = append(out, files...)
	}
	return out, nil
}

// Fingerprint names the index of sources: it changes when a source is added
// or removed or one of its files changes (path, size, modification time).
func Fingerprint(sources []string) (string, error) {
	files, err := sourceFiles(sources)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", formatVersion)
	for _, s := range sources {
		fmt.Fprintf(h, "source %s\n", s)
	}
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrSource, err)
		}
		abs, _ := filepath.Abs(f)
		fmt.Fprintf(h, "%s %d %d\n", abs, st.Size(), st.ModTime().UnixNano())
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// readSources yields every passage of sources in order.
func readSources(sources []string, yield func(knowledge.Passage) error) error {
	for _, src := range sources {
		if src == Dictionary {
			if err := readDictionary(yield); err != nil {
				return err
			}
			continue
		}
		files, err := sourceFiles([]string{src})
		if err != nil {
			return err
		}
		for _, f := range files {
			if err := readFile(f, yield); err != nil {
				return err
			}
		}
	}
	return nil
}

// readFile reads one document: a .jsonl file holds {"title","text"} objects
// a line; a .txt or .md file gives a passage per paragraph (blank-line
// separated), titled by the nearest Markdown heading or else the file name.
func readFile(path string, yield func(knowledge.Passage) error) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSource, err)
	}
	if strings.EqualFold(filepath.Ext(path), ".jsonl") {
		return readJSONL(path, data, yield)
	}
	base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	title := strings.ReplaceAll(base, "_", " ")
	var para []string
	start := 0
	flush := func() error {
		text := strings.TrimSpace(strings.Join(para, " "))
		para = para[:0]
		if text == "" {
			return nil
		}
		for _, c := range chunks(text) {
			if err := yield(knowledge.Passage{Title: title, Text: c, Kind: KindText, Source: fmt.Sprintf("%s:%d", path, start)}); err != nil {
				return err
			}
		}
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "":
			if err := flush(); err != nil {
				return err
			}
		case strings.HasPrefix(line, "#"):
			if err := flush(); err != nil {
				return err
			}
			if h := strings.TrimSpace(strings.TrimLeft(line, "#")); h != "" {
				title = h
			}
		default:
			if len(para) == 0 {
				start = n
			}
			para = append(para, line)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrSource, path, err)
	}
	return flush()
}

func readJSONL(path string, data []byte, yield func(knowledge.Passage) error) error {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var r struct {
			Title string `json:"title"`
			Text  string `json:"text"`
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			return fmt.Errorf("%w: %s:%d: %w (want {\"title\": ..., \"text\": ...})", ErrSource, path, n, err)
		}
		if strings.TrimSpace(r.Text) == "" {
			return fmt.Errorf("%w: %s:%d: empty \"text\"", ErrSource, path, n)
		}
		for _, c := range chunks(r.Text) {
			if err := yield(knowledge.Passage{Title: strings.TrimSpace(r.Title), Text: c, Kind: KindText, Source: fmt.Sprintf("%s:%d", path, n)}); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrSource, path, err)
	}
	return nil
}

// chunks splits a document's paragraph into passages of whole sentences of
// at most maxPassageChars each (a longer sentence is cut by cleanText).
func chunks(s string) []string {
	s = strings.TrimSpace(reSpaces.ReplaceAllString(s, " "))
	var out []string
	for s != "" {
		c := cleanText(s)
		if c == "" {
			break
		}
		out = append(out, c)
		s = strings.TrimLeft(s[len(c):], " ;:,")
	}
	return out
}
