package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/index/scorch/mergeplan"
	"github.com/blevesearch/bleve/v2/mapping"
	index "github.com/blevesearch/bleve_index_api"

	"github.com/voxpipe/voxpipe/llm/knowledge"
)

// Fields of an indexed passage.
const (
	fieldTitle = "title" // English-analysed (stemmed) headword, stored
	fieldKey   = "key"   // the lower-cased headword as one term
	fieldText  = "text"  // English-analysed text, stored
	fieldKind  = "kind"  // stored only
	fieldSrc   = "src"   // stored only
)

// DefaultCacheDir is where indexes are cached: $XDG_CACHE_HOME/voxpipe/knowledge
// (~/.cache/voxpipe/knowledge).
func DefaultCacheDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		d = os.TempDir()
	}
	return filepath.Join(d, "voxpipe", "knowledge")
}

func newMapping() mapping.IndexMapping {
	im := bleve.NewIndexMapping()
	im.ScoringModel = index.BM25Scoring
	im.DefaultAnalyzer = en.AnalyzerName
	im.IndexDynamic, im.StoreDynamic, im.DocValuesDynamic = false, false, false
	text := func(store bool) *mapping.FieldMapping {
		f := bleve.NewTextFieldMapping()
		f.Analyzer = en.AnalyzerName
		f.Store, f.IncludeInAll, f.IncludeTermVectors, f.DocValues = store, false, false, false
		return f
	}
	keyword := func(indexed, store bool) *mapping.FieldMapping {
		f := bleve.NewKeywordFieldMapping()
		f.Index, f.Store, f.IncludeInAll, f.IncludeTermVectors, f.DocValues = indexed, store, false, false, false
		return f
	}
	dm := bleve.NewDocumentStaticMapping()
	dm.AddFieldMappingsAt(fieldTitle, text(true))
	dm.AddFieldMappingsAt(fieldKey, keyword(true, false))
	dm.AddFieldMappingsAt(fieldText, text(true))
	dm.AddFieldMappingsAt(fieldKind, keyword(false, true))
	dm.AddFieldMappingsAt(fieldSrc, keyword(false, true))
	im.DefaultMapping = dm
	return im
}

// Progress receives human-readable build progress lines.
type Progress func(format string, args ...any)

// Open returns the index of sources from cacheDir, building it first when
// it is missing or its sources changed. Processes sharing cacheDir build an
// index once (an flock); a build goes to a temporary folder that is renamed
// into place when complete, so a killed build never leaves a half index.
func Open(ctx context.Context, sources []string, cacheDir string, progress Progress) (*Index, error) {
	if len(sources) == 0 {
		return nil, fmt.Errorf("%w: no sources", ErrSource)
	}
	if progress == nil {
		progress = func(string, ...any) {}
	}
	if cacheDir == "" {
		cacheDir = DefaultCacheDir()
	}
	fp, err := Fingerprint(sources)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cacheDir, fp)
	if ix, err := openIndex(dir); err == nil {
		return ix, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("knowledge: cache: %w", err)
	}
	unlock, err := lockFile(ctx, dir+".lock")
	if err != nil {
		return nil, err
	}
	defer unlock()
	if ix, err := openIndex(dir); err == nil { // another process built it while we waited
		return ix, nil
	}
	os.RemoveAll(dir) // a folder that does not open is not an index
	stale, _ := filepath.Glob(dir + ".tmp-*")
	for _, s := range stale { // a killed build's (we hold the lock: nobody is building)
		os.RemoveAll(s)
	}
	tmp := fmt.Sprintf("%s.tmp-%d", dir, os.Getpid())
	if err := build(ctx, tmp, sources, progress); err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("knowledge: cache: %w", err)
	}
	return openIndex(dir)
}

func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("knowledge: cache lock: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); _ = f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("knowledge: cache lock: %w", err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func build(ctx context.Context, dir string, sources []string, progress Progress) error {
	start := time.Now()
	progress("knowledge: indexing %s into %s", strings.Join(sources, ", "), filepath.Dir(dir))
	idx, err := bleve.NewUsing(dir, newMapping(), scorch.Name, scorch.Name, nil)
	if err != nil {
		return fmt.Errorf("knowledge: index: %w", err)
	}
	n, last := 0, time.Now()
	batch := idx.NewBatch()
	flush := func() error {
		if batch.Size() == 0 {
			return nil
		}
		if err := idx.Batch(batch); err != nil {
			return fmt.Errorf("knowledge: index: %w", err)
		}
		batch.Reset()
		return ctx.Err()
	}
	err = readSources(sources, func(p knowledge.Passage) error {
		doc := map[string]any{fieldTitle: p.Title, fieldKey: strings.ToLower(p.Title), fieldText: p.Text, fieldKind: p.Kind}
		if p.Source != "" {
			doc[fieldSrc] = p.Source
		}
		if err := batch.Index(strconv.Itoa(n), doc); err != nil {
			return fmt.Errorf("knowledge: index: %w", err)
		}
		n++
		if batch.Size() >= 4000 {
			if err := flush(); err != nil {
				return err
			}
			if time.Since(last) > 2*time.Second {
				progress("knowledge: %d passages indexed (%.0f s)", n, time.Since(start).Seconds())
				last = time.Now()
			}
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err == nil && n == 0 {
		err = fmt.Errorf("%w: %s hold no passages", ErrSource, strings.Join(sources, ", "))
	}
	if err == nil {
		err = compact(ctx, idx)
	}
	if cerr := idx.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("knowledge: index: %w", cerr)
	}
	if err != nil {
		return err
	}
	progress("knowledge: %d passages indexed in %.1f s", n, time.Since(start).Seconds())
	return nil
}

// compact merges the index into few segments: a lookup then walks one
// dictionary per term instead of one per batch.
func compact(ctx context.Context, idx bleve.Index) error {
	adv, err := idx.Advanced()
	if err != nil {
		return fmt.Errorf("knowledge: index: %w", err)
	}
	s, ok := adv.(*scorch.Scorch)
	if !ok {
		return nil
	}
	mo := mergeplan.DefaultMergePlanOptions
	mo.MaxSegmentsPerTier = 1
	mo.SegmentsPerMergeTask = 64
	mo.MaxSegmentSize = 1 << 30
	if err := s.ForceMerge(ctx, &mo); err != nil {
		return fmt.Errorf("knowledge: index merge: %w", err)
	}
	return nil
}

// Index is an opened, read-only knowledge index. It is safe for concurrent use.
type Index struct {
	idx  bleve.Index
	dir  string
	docs uint64
	// df caches document frequencies (rareTerms) by field and term;
	// dfKeys counts the entries stored.
	df     sync.Map
	dfKeys atomic.Int64
}

func openIndex(dir string) (*Index, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, err
	}
	idx, err := bleve.OpenUsing(dir, map[string]any{"read_only": true})
	if err != nil {
		return nil, fmt.Errorf("knowledge: open %s: %w", dir, err)
	}
	n, err := idx.DocCount()
	if err != nil || n == 0 {
		idx.Close()
		return nil, fmt.Errorf("knowledge: open %s: empty index", dir)
	}
	return &Index{idx: idx, dir: dir, docs: n}, nil
}

// Dir is the index's folder in the cache.
func (ix *Index) Dir() string { return ix.dir }

// Passages is how many passages the index holds.
func (ix *Index) Passages() uint64 { return ix.docs }

// Close releases the index.
func (ix *Index) Close() error { return ix.idx.Close() }
