package store

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/search/query"

	"github.com/voxpipe/voxpipe/llm/knowledge"
)

// Reranking. bleve's BM25 scores depend on the query (its length, its
// terms' rarity), so they cannot be compared with a fixed threshold. A hit's
// final score is instead built from query-independent parts, and min_score
// means the same for every question:
//
//	headwordExact per word when the passage's title is a phrase of the question
//	(lower-cased, or a plural of it), headwordStem per word when only the
//	stemmed forms agree; up to bm25Share for its BM25 score relative to the
//	best hit's; plus a fixed bonus for its kind.
//
// The default min_score of 7 keeps headword matches only.
const (
	headwordExact = 10
	headwordStem  = 8
	bm25Share     = 2
	// MaxQueryWords bounds a lookup: the first words of a question name its subject.
	MaxQueryWords = 16
	maxPhrase     = 3
)

var kindBonus = map[string]float64{KindNoun: 3, KindWordNet: 1, KindFOLDOC: 1.5, KindJargon: 1.5}

// notHeadwords never start or end a headword phrase, and are left out of
// the text match: English stop words, the words of asking ("tell me about",
// "define", "what does X mean"),
var notHeadwords = func() map[string]bool {
	m := map[string]bool{}
	for _, line := range strings.Split(string(en.EnglishStopWords), "\n") {
		line, _, _ = strings.Cut(line, "|")
		if f := strings.Fields(line); len(f) > 0 {
			m[f[0]] = true
		}
	}
	// and the words of small talk, so "how are you today" or "thanks, bye"
	// bring no passages (they only mislead and lengthen the prompt).
	for _, w := range strings.Fields("tell define mean means meaning explain know please sentence use example give what's whats say said word thing kind sort type called voxpipe " +
		"hey hi hello ok okay yes yeah thanks thank sorry bye goodbye today tonight tomorrow yesterday now morning evening night doing name fine " +
		"can could would should will may might must shall") {
		m[w] = true
	}
	return m
}()

// queryWords lower-cases the question's first MaxQueryWords words.
func queryWords(q string) []string {
	f := strings.FieldsFunc(strings.ToLower(q), func(r rune) bool {
		keep := unicode.IsLetter(r) || unicode.IsDigit(r) || r == '\'' || r == '-' || r == '+' || r == '#' || r == '/'
		return !keep
	})
	var out []string
	for _, w := range f {
		w = strings.Trim(w, "'-/")
		w = strings.TrimSuffix(w, "'s")
		if w != "" {
			out = append(out, w)
		}
		if len(out) == MaxQueryWords {
			break
		}
	}
	return out
}

// phrases are the question's runs of up to maxPhrase words that neither
// start nor end with a stop word, with singular forms of their last word.
func phrases(words []string) map[string]int {
	out := map[string]int{}
	for i := range words {
		if notHeadwords[words[i]] {
			continue
		}
		for n := 1; n <= maxPhrase && i+n <= len(words); n++ {
			last := words[i+n-1]
			if notHeadwords[last] {
				continue
			}
			p := strings.Join(words[i:i+n], " ")
			out[p] = n
			for _, s := range singulars(last) {
				out[strings.Join(append(append([]string{}, words[i:i+n-1]...), s), " ")] = n
			}
		}
	}
	return out
}

func singulars(w string) []string {
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return []string{w[:len(w)-3] + "y"}
	case len(w) > 4 && (strings.HasSuffix(w, "ses") || strings.HasSuffix(w, "xes") || strings.HasSuffix(w, "ches") || strings.HasSuffix(w, "shes") || strings.HasSuffix(w, "oes")):
		return []string{w[:len(w)-2], w[:len(w)-1]}
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss"):
		return []string{w[:len(w)-1]}
	}
	return nil
}

func terms(a analysis.Analyzer, s string) []string {
	ts := a.Analyze([]byte(s))
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = string(t.Term)
	}
	return out
}

// containsRun reports whether needle occurs as a contiguous run in hay.
func containsRun(hay, needle []string) bool {
	if len(needle) == 0 {
		return false
	}
outer:
	for i := 0; i+len(needle) <= len(hay); i++ {
		for j := range needle {
			if hay[i+j] != needle[j] {
				continue outer
			}
		}
		return true
	}
	return false
}

// Search returns up to topK passages for question whose reranked score is
// at least minScore, best first.
func (ix *Index) Search(ctx context.Context, question string, topK int, minScore float64) ([]knowledge.Passage, error) {
	words := queryWords(question)
	if len(words) == 0 || topK <= 0 {
		return nil, nil
	}
	heads := phrases(words)
	var content []string // the words of asking say nothing of the subject
	for _, w := range words {
		if !notHeadwords[w] {
			content = append(content, w)
		}
	}
	if len(content) == 0 {
		return nil, nil
	}
	text := strings.Join(content, " ")
	an := ix.idx.Mapping().AnalyzerNamed(en.AnalyzerName)
	qterms := terms(an, text)
	var qs []query.Query
	for p := range heads {
		tq := bleve.NewTermQuery(p)
		tq.SetField(fieldKey)
		tq.SetBoost(5)
		qs = append(qs, tq)
	}
	for _, f := range []struct {
		name  string
		boost float64
	}{{fieldTitle, 2}, {fieldText, 1}} {
		rare, err := ix.rareTerms(ctx, f.name, qterms)
		if err != nil {
			return nil, err
		}
		if len(rare) > 0 {
			qs = append(qs, matchTerms(f.name, rare, f.boost))
		}
	}
	req := bleve.NewSearchRequestOptions(bleve.NewDisjunctionQuery(qs...), max(16, 4*topK), 0, false)
	req.Fields = []string{fieldTitle, fieldText, fieldKind, fieldSrc}
	res, err := ix.idx.SearchInContext(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("knowledge: search: %w", err)
	}
	if len(res.Hits) == 0 {
		return nil, nil
	}
	best := res.Hits[0].Score
	out := make([]knowledge.Passage, 0, len(res.Hits))
	seen := map[string]bool{}
	for _, h := range res.Hits {
		p := knowledge.Passage{}
		p.Title, _ = h.Fields[fieldTitle].(string)
		p.Text, _ = h.Fields[fieldText].(string)
		p.Kind, _ = h.Fields[fieldKind].(string)
		p.Source, _ = h.Fields[fieldSrc].(string)
		if seen[p.Title+"\x00"+p.Text] {
			continue
		}
		seen[p.Title+"\x00"+p.Text] = true
		title := strings.ToLower(p.Title)
		if n, ok := heads[title]; ok {
			p.Score = headwordExact * float64(n)
		} else if tt := terms(an, title); containsRun(qterms, tt) {
			p.Score = headwordStem * float64(min(len(tt), maxPhrase))
		}
		if best > 0 {
			p.Score += bm25Share * h.Score / best
		}
		p.Score += kindBonus[p.Kind]
		p.Score = math.Round(p.Score*100) / 100
		out = append(out, p)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Score > out[j].Score })
	n := 0
	for n < len(out) && n < topK && out[n].Score >= minScore {
		n++
	}
	return out[:n], nil
}

// matchTerms is bleve's match query (any of the terms, in field) on terms
// already analysed.
func matchTerms(field string, ts []string, boost float64) query.Query {
	qs := make([]query.Query, len(ts))
	for i, t := range ts {
		tq := bleve.NewTermQuery(t)
		tq.SetField(field)
		tq.SetBoost(boost)
		qs[i] = tq
	}
	d := bleve.NewDisjunctionQuery(qs...)
	d.SetMin(1)
	d.SetBoost(boost)
	return d
}

// Common terms. A question's words that occur in over commonShare of the
// passages' texts or titles (and in over commonMinDocs of them: "genus",
// "state", "small" in the texts of the dictionary, "genus" and "family" in
// its titles) are left out of that field's match: a
// disjunction scores every passage that has any of its terms, so such a
// word made a lookup walk thousands of postings (p99 5-6 ms against 0.15
// ms typical) to add a few hundredths of a BM25 point, since their IDF is
// low. Headword phrases still use every word. When every word is common,
// the rarest is kept.
const (
	commonShare    = 0.01
	commonMinDocs  = 1000
	maxDocFreqKeys = 1 << 16 // document frequencies cached at most
)

// rareTerms returns ts without duplicates and without the terms common in
// field (or, when all are common, the rarest).
func (ix *Index) rareTerms(ctx context.Context, field string, ts []string) ([]string, error) {
	limit := max(uint64(commonMinDocs), uint64(commonShare*float64(ix.docs)))
	var out []string
	rarest, rarestN := "", uint64(0)
	seen := map[string]bool{}
	for _, t := range ts {
		if seen[t] {
			continue
		}
		seen[t] = true
		n, err := ix.docFreq(ctx, field, t)
		if err != nil {
			return nil, err
		}
		if n <= limit {
			out = append(out, t)
		} else if rarest == "" || n < rarestN {
			rarest, rarestN = t, n
		}
	}
	if len(out) == 0 && rarest != "" {
		out = append(out, rarest)
	}
	return out, nil
}

// docFreq is how many passages have term t in field (cached: the index is
// read-only).
func (ix *Index) docFreq(ctx context.Context, field, t string) (uint64, error) {
	key := field + "\x00" + t
	if n, ok := ix.df.Load(key); ok {
		return n.(uint64), nil
	}
	adv, err := ix.idx.Advanced()
	if err != nil {
		return 0, fmt.Errorf("knowledge: search: %w", err)
	}
	r, err := adv.Reader()
	if err != nil {
		return 0, fmt.Errorf("knowledge: search: %w", err)
	}
	defer r.Close()
	tfr, err := r.TermFieldReader(ctx, []byte(t), field, false, false, false)
	if err != nil {
		return 0, fmt.Errorf("knowledge: search: %w", err)
	}
	n := tfr.Count()
	_ = tfr.Close() // a reader of a read-only snapshot: nothing to flush
	if ix.dfKeys.Add(1) <= maxDocFreqKeys {
		ix.df.Store(key, n)
	}
	return n, nil
}
