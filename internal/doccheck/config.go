package doccheck

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"gopkg.in/yaml.v3"
)

// ConfigDoc renders docs/configuration.md from configs/default.yaml: every
// key, its default and the file's own comment on it. The file is the one
// place a key is explained; the page is generated from it so the two cannot
// disagree.
func ConfigDoc(yamlPath string) ([]byte, error) {
	src, err := os.ReadFile(yamlPath)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", yamlPath, err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: not a mapping", yamlPath)
	}
	var b bytes.Buffer
	b.WriteString(`# Configuration

Generated from [configs/default.yaml](../configs/default.yaml) by
` + "`go test ./internal/doccheck -run TestConfigDoc -update`" + `; a test fails when the two differ,
so edit the YAML file's comments, not this page.

The server builds its config as: built-in defaults → the YAML file (` + "`--config`" + `, default
configs/default.yaml; unknown keys are errors naming the file and line) → ` + "`--addr`" + ` and
` + "`--set key=value`" + ` → validation. Any key can be set on the command line, e.g.
` + "`bin/voxpipe serve --set pipeline.vad.end_silence_ms=400`" + `. Secrets are never read from a
file: the keys that need one name an environment variable. For remote backends, start from
[configs/openai-compatible.yaml](../configs/openai-compatible.yaml) or
[configs/volcengine.yaml](../configs/volcengine.yaml).

Each key is shown as ` + "`key` = `default`" + `, then what the file says of it.
`)
	// The file's preamble says what the paragraph above says.
	top := doc.Content[0]
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		fmt.Fprintf(&b, "\n## %s\n\n", k.Value)
		if c := comment(k.HeadComment, k.LineComment, v.LineComment); c != "" && i > 0 {
			b.WriteString(c + "\n\n")
		}
		if v.Kind != yaml.MappingNode {
			leaf(&b, k.Value, k, v)
			continue
		}
		walk(&b, k.Value, v, 0)
	}
	return b.Bytes(), nil
}

// walk writes the keys of mapping m under prefix: its own leaves first,
// then one section per nested mapping, so no leaf lands under a subsection
// it does not belong to.
func walk(b *bytes.Buffer, prefix string, m *yaml.Node, depth int) {
	var subs []int
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if v.Kind == yaml.MappingNode && len(v.Content) > 0 {
			subs = append(subs, i)
			continue
		}
		leaf(b, prefix+"."+k.Value, k, v)
		if c := comment(k.FootComment, v.FootComment); c != "" {
			b.WriteString("\n" + c + "\n\n")
		}
	}
	for _, i := range subs {
		k, v := m.Content[i], m.Content[i+1]
		path := prefix + "." + k.Value
		fmt.Fprintf(b, "\n%s %s\n\n", strings.Repeat("#", min(depth+3, 6)), path)
		if c := comment(k.HeadComment, k.LineComment, v.LineComment); c != "" {
			b.WriteString(c + "\n\n")
		}
		walk(b, path, v, depth+1)
		if c := comment(k.FootComment); c != "" {
			b.WriteString("\n" + c + "\n")
		}
	}
}

func leaf(b *bytes.Buffer, path string, k, v *yaml.Node) {
	val := v.Value
	if v.Kind != yaml.ScalarNode {
		n := *v
		n.HeadComment, n.LineComment, n.FootComment = "", "", ""
		n.Style = yaml.FlowStyle
		out, err := yaml.Marshal(&n)
		if err == nil {
			val = strings.TrimSpace(string(out))
		}
	}
	if v.Kind == yaml.ScalarNode && v.Tag == "!!str" && val == "" {
		val = `""`
	}
	line := fmt.Sprintf("- `%s` = `%s`", path, val)
	if c := comment(k.HeadComment, k.LineComment, v.LineComment); c != "" {
		line += " — " + c
	}
	b.WriteString(line + "\n")
}

// comment joins YAML comments into one paragraph, without the #s.
func comment(cs ...string) string {
	var words []string
	for _, c := range cs {
		for _, l := range strings.Split(c, "\n") {
			l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "#"))
			if l != "" {
				words = append(words, l)
			}
		}
	}
	// Angle brackets in the comments are placeholders (<token>), not HTML.
	return strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(strings.Join(words, " "))
}
