package store

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/voxpipe/voxpipe/llm/knowledge"
)

// Where Debian installs the dictionary source's packages (wordnet-base,
// dict-foldoc, dict-jargon; `make deps` installs them).
var (
	WordNetDir = "/usr/share/wordnet"
	DictdDir   = "/usr/share/dictd"
)

// Passage kinds of the dictionary source; the reranker gives WordNet nouns,
// other WordNet senses and computing terms small fixed bonuses.
const (
	KindNoun    = "wordnet-noun"
	KindWordNet = "wordnet"
	KindFOLDOC  = "foldoc"
	KindJargon  = "jargon"
	KindText    = "text"
)

// maxPassageChars bounds one passage's text: whole sentences up to this many
// characters (a clause of a longer first sentence).
const maxPassageChars = 300

// dictionaryFiles lists the files the dictionary source reads (for the
// index fingerprint and the error when a package is missing).
func dictionaryFiles() []string {
	var fs []string
	for _, pos := range wordnetPOS {
		fs = append(fs, filepath.Join(WordNetDir, "index."+pos.name), filepath.Join(WordNetDir, "data."+pos.name))
	}
	for _, d := range []string{"foldoc", "jargon"} {
		fs = append(fs, filepath.Join(DictdDir, d+".index"), filepath.Join(DictdDir, d+".dict.dz"))
	}
	return fs
}

var wordnetPOS = []struct{ name, kind string }{
	{"noun", KindNoun}, {"verb", KindWordNet}, {"adj", KindWordNet}, {"adv", KindWordNet},
}

// readDictionary yields the bundled dictionary's passages: the most frequent
// sense of every WordNet lemma (its gloss without examples), then the first
// sense of every FOLDOC and Jargon File entry.
func readDictionary(yield func(knowledge.Passage) error) error {
	for _, f := range dictionaryFiles() {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("knowledge: dictionary source: %w (install wordnet-base dict-foldoc dict-jargon: make deps)", err)
		}
	}
	for _, pos := range wordnetPOS {
		if err := readWordNet(pos.name, pos.kind, yield); err != nil {
			return err
		}
	}
	for _, d := range []struct{ name, kind string }{{"foldoc", KindFOLDOC}, {"jargon", KindJargon}} {
		if err := readDictd(d.name, d.kind, yield); err != nil {
			return err
		}
	}
	return nil
}

var (
	reParens   = regexp.MustCompile(`\s*\([^)]*\)`)
	reLexID    = regexp.MustCompile(`\(.*\)$`)
	reSpaces   = regexp.MustCompile(`\s+`)
	reSentence = regexp.MustCompile(`[.!?]\s+[A-Z]`)
)

func readWordNet(pos, kind string, yield func(knowledge.Passage) error) error {
	// data.<pos>: offset lex_filenum ss_type w_cnt(hex) word lex_id ... | gloss
	glosses := map[string]struct {
		words []string
		gloss string
	}{}
	dataPath := filepath.Join(WordNetDir, "data."+pos)
	err := eachLine(dataPath, func(n int, line string) error {
		if strings.HasPrefix(line, "  ") {
			return nil // licence header
		}
		head, gloss, _ := strings.Cut(line, "|")
		f := strings.Fields(head)
		if len(f) < 5 {
			return fmt.Errorf("%s:%d: a synset line needs at least 5 fields", dataPath, n)
		}
		nw, err := strconv.ParseInt(f[3], 16, 32)
		if err != nil || 4+2*int(nw) > len(f) {
			return fmt.Errorf("%s:%d: bad word count %q", dataPath, n, f[3])
		}
		words := make([]string, nw)
		for i := range words {
			words[i] = strings.ReplaceAll(reLexID.ReplaceAllString(f[4+2*i], ""), "_", " ")
		}
		glosses[f[0]] = struct {
			words []string
			gloss string
		}{words, strings.TrimSpace(gloss)}
		return nil
	})
	if err != nil {
		return err
	}
	// index.<pos>: lemma pos synset_cnt p_cnt [ptr...] sense_cnt tagsense_cnt offset... (most frequent first)
	indexPath := filepath.Join(WordNetDir, "index."+pos)
	return eachLine(indexPath, func(n int, line string) error {
		if strings.HasPrefix(line, "  ") {
			return nil
		}
		f := strings.Fields(line)
		if len(f) < 4 {
			return fmt.Errorf("%s:%d: an index line needs at least 4 fields", indexPath, n)
		}
		ns, err := strconv.Atoi(f[2])
		if err != nil || ns < 1 || ns > len(f) {
			return fmt.Errorf("%s:%d: bad synset count %q", indexPath, n, f[2])
		}
		lemma := strings.ReplaceAll(f[0], "_", " ")
		if strings.ContainsAny(lemma, "0123456789") || len(strings.Fields(lemma)) > 3 {
			return nil
		}
		e, ok := glosses[f[len(f)-ns]]
		if !ok {
			return nil
		}
		title := lemma
		for _, w := range e.words {
			if strings.EqualFold(w, lemma) {
				title = w // the synset's spelling keeps proper nouns capitalised
				break
			}
		}
		var defs []string
		for _, part := range strings.Split(e.gloss, ";") {
			part = strings.TrimSpace(part)
			if strings.HasPrefix(part, `"`) {
				break // examples follow the definitions
			}
			if part != "" {
				defs = append(defs, part)
			}
		}
		text := cleanText(reParens.ReplaceAllString(strings.Join(defs, "; "), ""))
		if len(text) < 3 {
			return nil
		}
		return yield(knowledge.Passage{Title: title, Text: text, Kind: kind})
	})
}

func eachLine(path string, fn func(n int, line string) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("knowledge: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if err := fn(n, sc.Text()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("knowledge: %s: %w", path, err)
	}
	return nil
}

const b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

func b64num(s string) (int, error) {
	n := 0
	for _, c := range s {
		i := strings.IndexRune(b64, c)
		if i < 0 {
			return 0, fmt.Errorf("bad base-64 number %q", s)
		}
		n = n*64 + i
	}
	return n, nil
}

var (
	reURLRef    = regexp.MustCompile(`\{([^{}]*?)\s*\(https?://[^)]*\)\}`)
	reRef       = regexp.MustCompile(`\{([^{}]*)\}`)
	reTag       = regexp.MustCompile(`<[^>]*>`)
	reURL       = regexp.MustCompile(`https?://\S+`)
	reBrackets  = regexp.MustCompile(`\[[^\]]*\]`)
	reDate      = regexp.MustCompile(`\(\d{4}-\d{2}-\d{2}\)`)
	rePOS       = regexp.MustCompile(`^(?:(?:n|v|adj|adv|vt|vi|interj|pl|prep|conj)\.,?\s*)+`)
	reSense1    = regexp.MustCompile(`^\s*1\.\s*`)
	reSense2    = regexp.MustCompile(`\s2\.\s`)
	rePron      = regexp.MustCompile(`^(?:\S+\s+)?/[^/]{1,40}/\s*`)
	reLeadPar   = regexp.MustCompile(`^\(([^)]*)\)\s*`)
	reSpaceDot  = regexp.MustCompile(`\s+\.`)
	reJargonPOS = regexp.MustCompile(`^(?:[a-z]+\.\s*)+`)
)

// readDictd reads a dictd database (FOLDOC, the Jargon File): its .index
// (headword, base-64 offset and length) into the gzip-compatible .dict.dz.
func readDictd(name, kind string, yield func(knowledge.Passage) error) error {
	dataPath := filepath.Join(DictdDir, name+".dict.dz")
	f, err := os.Open(dataPath)
	if err != nil {
		return fmt.Errorf("knowledge: %w", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("knowledge: %s: %w", dataPath, err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		return fmt.Errorf("knowledge: %s: %w", dataPath, err)
	}
	indexPath := filepath.Join(DictdDir, name+".index")
	return eachLine(indexPath, func(n int, line string) error {
		f := strings.Split(line, "\t")
		if len(f) < 3 {
			return fmt.Errorf("%s:%d: a dictd index line needs 3 tab-separated fields", indexPath, n)
		}
		if strings.HasPrefix(f[0], "00-database") {
			return nil
		}
		off, err1 := b64num(f[1])
		size, err2 := b64num(f[2])
		if err1 != nil || err2 != nil || off+size > len(data) {
			return fmt.Errorf("%s:%d: bad offset or length", indexPath, n)
		}
		p, ok := dictdPassage(f[0], string(data[off:off+size]))
		if !ok {
			return nil
		}
		p.Kind = kind
		return yield(p)
	})
}

// dictdPassage cleans one entry to its first sense, as the training corpus
// does (llm/train/prepare.py).
func dictdPassage(head, entry string) (knowledge.Passage, bool) {
	lines := strings.Split(entry, "\n")
	if h := strings.TrimSpace(lines[0]); h != "" {
		head = h
	}
	if strings.Contains(head, ",") || len(head) > 40 || !strings.ContainsAny(strings.ToLower(head), "abcdefghijklmnopqrstuvwxyz") {
		return knowledge.Passage{}, false
	}
	// Lines after the headword up to the first blank one are its variants
	// ("computer\ncomputing\n\n   <computer> A machine ..."): skip them.
	i := 1
	for i < len(lines) && strings.TrimSpace(lines[i]) != "" {
		i++
	}
	var body []string
	for _, l := range lines[i:] {
		if l = strings.TrimSpace(l); l != "" {
			body = append(body, l)
		}
	}
	s := strings.Join(body, " ")
	s = reSpaces.ReplaceAllString(s, " ")
	s = reJargonPOS.ReplaceAllString(s, "")
	s = reURLRef.ReplaceAllString(s, "$1")
	s = reRef.ReplaceAllString(s, "$1")
	s = reTag.ReplaceAllString(s, "")
	s = reURL.ReplaceAllString(s, "")
	s = reBrackets.ReplaceAllString(s, "")
	s = reDate.ReplaceAllString(s, "")
	s = strings.TrimSpace(reSpaces.ReplaceAllString(s, " "))
	s = reSense1.ReplaceAllString(s, "")
	s = rePOS.ReplaceAllString(s, "")
	s = reSpaceDot.ReplaceAllString(s, ".")
	if loc := reSense2.FindStringIndex(s); loc != nil {
		s = s[:loc[0]]
	}
	s = rePron.ReplaceAllString(s, "")
	s = reLeadPar.ReplaceAllString(s, "")
	s = cleanText(s)
	low := strings.ToLower(s)
	if len(s) < 20 || strings.HasPrefix(low, "see") || strings.HasPrefix(low, "compare") || strings.HasPrefix(low, "abbreviation") {
		return knowledge.Passage{}, false
	}
	return knowledge.Passage{Title: head, Text: s}, true
}

// cleanText collapses white space and keeps whole sentences up to
// maxPassageChars (cutting one long sentence at a clause or a word).
func cleanText(s string) string {
	s = strings.TrimSpace(reSpaces.ReplaceAllString(s, " "))
	s = strings.TrimRight(s, ";:, ")
	if len(s) <= maxPassageChars {
		return s
	}
	cut := -1
	for _, loc := range reSentence.FindAllStringIndex(s, -1) {
		if loc[0]+1 > maxPassageChars {
			break
		}
		cut = loc[0] + 1
	}
	if cut > 0 {
		return s[:cut]
	}
	if i := strings.LastIndex(s[:maxPassageChars], ","); i > 60 {
		return s[:i]
	}
	if i := strings.LastIndex(s[:maxPassageChars], " "); i > 0 {
		return s[:i]
	}
	return s[:maxPassageChars]
}
