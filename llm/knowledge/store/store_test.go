package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/voxpipe/voxpipe/llm/knowledge"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

var shopDocs = map[string]string{
	"faq.md":              "# Opening hours\nThe shop opens at nine in the morning\nand closes at six.\n\n# Returns\nBring the receipt within thirty days for a full refund.\n",
	"products/kettle.txt": "The kettle boils a litre of water in three minutes.\n\nIts lid opens with a button on the handle.\n",
	"glossary.jsonl": `{"title": "receipt", "text": "a paper that proves what you paid"}
{"title": "refund", "text": "money given back for a returned item"}
`,
	"notes.csv": "ignored,file\n",
}

func readAll(t *testing.T, sources []string) []knowledge.Passage {
	t.Helper()
	var ps []knowledge.Passage
	if err := readSources(sources, func(p knowledge.Passage) error { ps = append(ps, p); return nil }); err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestFolderSource(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, shopDocs)
	ps := readAll(t, []string{dir})
	if len(ps) != 6 {
		t.Fatalf("got %d passages, want 6: %+v", len(ps), ps)
	}
	byText := map[string]knowledge.Passage{}
	for _, p := range ps {
		byText[p.Text] = p
	}
	p := byText["The shop opens at nine in the morning and closes at six."]
	if p.Title != "Opening hours" || p.Source != filepath.Join(dir, "faq.md")+":2" || p.Kind != KindText {
		t.Fatalf("markdown paragraph: %+v", p)
	}
	if p := byText["Its lid opens with a button on the handle."]; p.Title != "kettle" {
		t.Fatalf("text file paragraph titled %q, want the file name", p.Title)
	}
	if p := byText["money given back for a returned item"]; p.Title != "refund" || !strings.HasSuffix(p.Source, "glossary.jsonl:2") {
		t.Fatalf("jsonl line: %+v", p)
	}
}

func TestFolderSourceErrors(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.jsonl": "{\"title\": \"x\", \"text\": \"fine\"}\n{\"title\": \"y\", \"txt\": \"typo\"}\n"})
	err := readSources([]string{dir}, func(knowledge.Passage) error { return nil })
	if !errors.Is(err, ErrSource) || !strings.Contains(err.Error(), "a.jsonl:2") || !strings.Contains(err.Error(), "txt") {
		t.Fatalf("got %v, want ErrSource naming a.jsonl:2 and the unknown field", err)
	}
	if _, err := Fingerprint([]string{filepath.Join(dir, "missing")}); !errors.Is(err, ErrSource) {
		t.Fatalf("missing folder: got %v", err)
	}
	if _, err := Fingerprint([]string{filepath.Join(dir, "a.jsonl")}); !errors.Is(err, ErrSource) || !strings.Contains(err.Error(), "not a folder") {
		t.Fatalf("a file as a source: got %v", err)
	}
	empty := t.TempDir()
	if _, err := Open(context.Background(), []string{empty}, t.TempDir(), nil); !errors.Is(err, ErrSource) {
		t.Fatalf("a folder without documents: got %v", err)
	}
}

func TestChunksLongParagraph(t *testing.T) {
	s := strings.Repeat("This sentence is about forty characters. ", 20)
	cs := chunks(s)
	if len(cs) < 3 {
		t.Fatalf("got %d chunks", len(cs))
	}
	total := 0
	for _, c := range cs {
		if len(c) > maxPassageChars || !strings.HasSuffix(c, ".") {
			t.Fatalf("chunk of %d chars: %q", len(c), c)
		}
		total += len(c) + 1
	}
	if total != len(strings.TrimSpace(s))+1 {
		t.Fatalf("chunks cover %d chars of %d", total, len(s))
	}
}

func openFolder(t *testing.T, files map[string]string) (*Index, string, string) {
	t.Helper()
	src, cache := t.TempDir(), t.TempDir()
	writeFiles(t, src, files)
	ix, err := Open(context.Background(), []string{src}, cache, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	return ix, src, cache
}

func TestSearch(t *testing.T) {
	ix, _, _ := openFolder(t, map[string]string{
		"dict.jsonl": `{"title": "kettle", "text": "a metal pot for boiling water"}
{"title": "teapot", "text": "a pot for brewing tea, often filled from a kettle"}
{"title": "boiling point", "text": "the temperature at which a liquid boils"}
{"title": "shop", "text": "a place where things are sold"}
`,
	})
	ctx := context.Background()
	ps, err := ix.Search(ctx, "What is a kettle?", 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 || ps[0].Title != "kettle" || ps[1].Title != "teapot" {
		t.Fatalf("headword first, then the text match: %+v", ps)
	}
	if ps[0].Score < headwordExact || ps[1].Score >= headwordExact {
		t.Fatalf("scores %.2f, %.2f: want a headword bonus on the first only", ps[0].Score, ps[1].Score)
	}
	// min_score 7 keeps headword matches only; a plural and a phrase are headwords too.
	for q, want := range map[string]string{"tell me about kettles": "kettle", "what is the boiling point of water": "boiling point", "shops near me": "shop"} {
		ps, err := ix.Search(ctx, q, 3, 7)
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) != 1 || ps[0].Title != want {
			t.Fatalf("%q: got %+v, want only %q", q, ps, want)
		}
	}
	if ps, _ := ix.Search(ctx, "what is it that you are", 2, 0); len(ps) != 0 {
		t.Fatalf("stop words only: got %+v", ps)
	}
	if ps, _ := ix.Search(ctx, "brewing", 2, 7); len(ps) != 0 {
		t.Fatalf("a text-only match passed min_score 7: %+v", ps)
	}
}

func TestCacheReusedAndRebuilt(t *testing.T) {
	src, cache := t.TempDir(), t.TempDir()
	writeFiles(t, src, shopDocs)
	builds := 0
	progress := func(format string, _ ...any) {
		if strings.HasPrefix(format, "knowledge: indexing") {
			builds++
		}
	}
	ctx := context.Background()
	ix1, err := Open(ctx, []string{src}, cache, progress)
	if err != nil {
		t.Fatal(err)
	}
	ix1.Close()
	ix2, err := Open(ctx, []string{src}, cache, progress)
	if err != nil {
		t.Fatal(err)
	}
	ix2.Close()
	if builds != 1 || ix1.Dir() != ix2.Dir() {
		t.Fatalf("second open: %d builds, dirs %s %s", builds, ix1.Dir(), ix2.Dir())
	}
	writeFiles(t, src, map[string]string{"faq.md": "# Opening hours\nOpen all day on Sundays.\n"})
	ix3, err := Open(ctx, []string{src}, cache, progress)
	if err != nil {
		t.Fatal(err)
	}
	defer ix3.Close()
	if builds != 2 || ix3.Dir() == ix1.Dir() {
		t.Fatalf("after a change: %d builds, dir %s", builds, ix3.Dir())
	}
	ps, _ := ix3.Search(ctx, "when are you open on sundays", 1, 0)
	if len(ps) != 1 || !strings.Contains(ps[0].Text, "Sundays") {
		t.Fatalf("rebuilt index: %+v", ps)
	}
}

func TestConcurrentOpensBuildOnce(t *testing.T) {
	src, cache := t.TempDir(), t.TempDir()
	writeFiles(t, src, shopDocs)
	fp, err := Fingerprint([]string{src})
	if err != nil {
		t.Fatal(err)
	}
	// A killed build's leftovers: removed by the next build.
	stale := filepath.Join(cache, fp+".tmp-99999")
	writeFiles(t, stale, map[string]string{"junk": "x"})
	var builds atomic.Int32
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ix, err := Open(context.Background(), []string{src}, cache, func(format string, _ ...any) {
				if strings.HasPrefix(format, "knowledge: indexing") {
					builds.Add(1)
				}
			})
			if err == nil {
				ix.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if builds.Load() != 1 {
		t.Fatalf("%d builds, want 1", builds.Load())
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale build folder still there: %v", err)
	}
}

func TestDictionary(t *testing.T) {
	for _, f := range dictionaryFiles() {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("dictionary packages not installed (%v): apt-get install wordnet-base dict-foldoc dict-jargon", err)
		}
	}
	want := map[string]string{
		KindNoun + "/volcano":    "a fissure in the earth's crust through which molten lava and gases erupt",
		KindWordNet + "/bicycle": "ride a bicycle",
	}
	counts := map[string]int{}
	found := map[string]bool{}
	var foldocComputer string
	err := readDictionary(func(p knowledge.Passage) error {
		counts[p.Kind]++
		if w, ok := want[p.Kind+"/"+p.Title]; ok && w == p.Text {
			found[p.Kind+"/"+p.Title] = true
		}
		if p.Kind == KindFOLDOC && p.Title == "computer" {
			foldocComputer = p.Text
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != len(want) {
		t.Fatalf("found %v of %v", found, want)
	}
	if !strings.HasPrefix(foldocComputer, "A machine that can be programmed") {
		t.Fatalf("FOLDOC computer: %q (variants and tags should be gone)", foldocComputer)
	}
	if counts[KindNoun] < 80000 || counts[KindFOLDOC] < 10000 || counts[KindJargon] < 1500 {
		t.Fatalf("passages by kind: %v", counts)
	}
}
