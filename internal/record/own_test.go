package record

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// Issue 36 item 3: retention treated every subfolder of the folder as a
// recording, so a 30-day-old knowledge/ folder placed there was deleted,
// and with max_recordings it also counted, which deleted the recording
// just made. Only folders voxpipe made (its name and its marker) count.
func TestRetentionTouchesOnlyItsOwnFolders(t *testing.T) {
	dir := t.TempDir()
	month := time.Now().Add(-30 * 24 * time.Hour)
	foreign := []string{
		"knowledge",              // someone's data
		"20200101T000000.000Z-x", // a recording's name, but no marker
		".tmp-notours",           // a crash leftover's name, no marker
		"zzz-last",               // sorts after every recording
	}
	for _, f := range foreign {
		if err := os.MkdirAll(filepath.Join(dir, f), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f, "data.txt"), make([]byte, 50000), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(filepath.Join(dir, f), month, month); err != nil {
			t.Fatal(err)
		}
	}
	// A folder with a marker but not voxpipe's name is not one either.
	if err := os.WriteFile(filepath.Join(dir, "knowledge", markerName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{Dir: dir, MaxRecordings: 1, MaxBytes: 20000, MaxAge: 7 * 24 * time.Hour}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	record(t, r, "first", 100)
	time.Sleep(2 * time.Millisecond)
	newest := filepath.Base(record(t, r, "second", 100))
	got := names(t, dir)
	want := append(slices.Clone(foreign), newest)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("kept %v, want %v (the foreign folders and the newest recording)", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, newest, markerName)); err != nil {
		t.Errorf("the recording has no marker: %v", err)
	}
}
