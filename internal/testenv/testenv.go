// Package testenv locates the repository and the shared test data for tests.
package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// RepoRoot returns the directory holding go.mod, walking up from the test's
// working directory (its package directory). It skips the test if there is none.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("repository root not found: no go.mod above the package")
		}
		dir = parent
	}
}

// SharedLLM returns ../shared/testdata/llm beside the repository root (the
// GGUF fixtures with llama.cpp's reference outputs), or skips the test,
// saying why, when it is absent.
func SharedLLM(t testing.TB) string {
	t.Helper()
	p := filepath.Join(RepoRoot(t), "..", "shared", "testdata", "llm")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared testdata absent: %s not found", p)
	}
	return p
}
