package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxpipe/voxpipe/internal/testenv"
)

// The shipped remote configs load, validate, select their backends, and
// comment every key (on its line or the line above).
func TestRemoteConfigs(t *testing.T) {
	for _, tc := range []struct {
		file          string
		asr, llm, tts string
	}{
		{"openai-compatible.yaml", "sphinx", "openai", "flite"},
		{"volcengine.yaml", "volc", "ark", "volc"},
	} {
		path := filepath.Join(testenv.RepoRoot(t), "configs", tc.file)
		c, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if c.ASR.Backend != tc.asr || c.LLM.Backend != tc.llm || c.TTS.Backend != tc.tts {
			t.Fatalf("%s: backends %s/%s/%s", tc.file, c.ASR.Backend, c.LLM.Backend, c.TTS.Backend)
		}
		// Every stage's remote section is set in the file, not left to defaults.
		for _, key := range []string{"llm." + tc.llm, "asr.openai", "tts.openai"} {
			if tc.file == "volcengine.yaml" {
				key = strings.Replace(key, "openai", "volc", 1)
			}
			if c.Origin(key) == "default" {
				t.Errorf("%s: %s not set in the file", tc.file, key)
			}
		}
		data, _ := os.ReadFile(path)
		lines := strings.Split(string(data), "\n")
		for i, l := range lines {
			s := strings.TrimSpace(l)
			if s == "" || strings.HasPrefix(s, "#") || !strings.Contains(s, ":") {
				continue
			}
			section := strings.HasSuffix(s, ":") && !strings.Contains(s, " ")
			commented := strings.Contains(s, " #") || (i > 0 && strings.HasPrefix(strings.TrimSpace(lines[i-1]), "#"))
			if !section && !commented {
				t.Errorf("%s line %d: %q has no comment", tc.file, i+1, s)
			}
		}
	}
}
