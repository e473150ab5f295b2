// Package doccheck keeps the project's documentation true to the project:
// its tests check that every relative link in README.md and docs/*.md
// resolves (files and #anchors), that every `make` target the docs name
// exists, that the README's shell commands still run (or are marked as
// needing what a test cannot have), and that docs/configuration.md is what
// configs/default.yaml generates.
package doccheck

import (
	"bufio"
	"bytes"
	"regexp"
	"strings"
	"unicode"
)

// Block is a fenced code block of a markdown file.
type Block struct {
	Lang  string
	Line  int // of the opening fence, 1-based
	Lines []string
}

// Split returns a markdown file's prose (code blocks blanked out, so line
// numbers hold) and its fenced code blocks.
func Split(src []byte) (prose []string, blocks []Block) {
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var cur *Block
	n := 0
	for sc.Scan() {
		n++
		l := sc.Text()
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "```") {
			if cur == nil {
				cur = &Block{Lang: strings.TrimSpace(strings.TrimPrefix(t, "```")), Line: n}
			} else {
				blocks = append(blocks, *cur)
				cur = nil
			}
			prose = append(prose, "")
			continue
		}
		if cur != nil {
			cur.Lines = append(cur.Lines, l)
			prose = append(prose, "")
			continue
		}
		prose = append(prose, l)
	}
	return prose, blocks
}

var (
	linkRE   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	codeRE   = regexp.MustCompile("`[^`]*`")
	headRE   = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	makeRE   = regexp.MustCompile(`(?:^|[\s(` + "`" + `])make\s+([a-z][a-z0-9_-]*)`)
	targetRE = regexp.MustCompile(`^([a-zA-Z0-9_-]+)\s*:`)
)

// Links returns the link targets of prose lines (not those inside inline
// code), with their 1-based line numbers.
func Links(prose []string) (targets []string, lines []int) {
	for i, l := range prose {
		l = codeRE.ReplaceAllString(l, "")
		for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
			targets = append(targets, m[1])
			lines = append(lines, i+1)
		}
	}
	return targets, lines
}

// Anchors returns the #fragments GitHub gives a markdown file's headings:
// lower case, punctuation dropped, spaces as hyphens, -1, -2... for repeats.
func Anchors(src []byte) map[string]bool {
	prose, _ := Split(src)
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range prose {
		m := headRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		a := Slug(m[1])
		if n := seen[a]; n > 0 {
			out[a+"-"+itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// Slug is a heading's anchor as GitHub makes it.
func Slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func itoa(n int) string {
	const d = "0123456789"
	if n < 10 {
		return d[n : n+1]
	}
	return itoa(n/10) + d[n%10:n%10+1]
}

// MakeTargets returns the targets a Makefile defines.
func MakeTargets(makefile []byte) map[string]bool {
	out := map[string]bool{}
	for _, l := range strings.Split(string(makefile), "\n") {
		if strings.HasPrefix(l, "\t") || strings.HasPrefix(l, "#") {
			continue
		}
		if strings.Contains(l, ":=") || strings.Contains(l, "?=") {
			continue
		}
		if m := targetRE.FindStringSubmatch(l); m != nil && !strings.HasPrefix(m[1], ".") {
			out[m[1]] = true
		}
	}
	return out
}

// MakeUses returns the make targets a text names ("make X" in prose, inline
// code or a command).
func MakeUses(text string) []string {
	var out []string
	for _, m := range makeRE.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}
