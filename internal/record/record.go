// Package record writes per-session recordings: the audio a client sent
// (in.wav), the audio the server answered with (out.wav) and every event
// both ways, transcripts, answers and latency traces included
// (events.jsonl, one JSON object a line).
//
// A session records into a hidden folder (.tmp-ID) that is renamed to its
// final name (TIME-ID) only when the session ends and every file is
// complete and synced, so a reader never sees a half-written recording; a
// crash leaves only a .tmp folder, removed at the next start. After each
// recording is finished the oldest are deleted until the folder is within
// Config's count, byte and age limits. One Recorder per folder.
//
// The folder may hold other things: only folders with a recording's name
// and the marker file (.voxpipe-recording) written into each at its start
// are ever counted or removed.
//
// # Concurrency
//
// A Recorder is safe for concurrent use. A Session belongs to one
// goroutine at a time: In, Out, Event and Close must not be called
// concurrently (the transport's tee calls them from one goroutine per
// direction and serialises them with the Session's mutex).
package record

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Config says where recordings go and how many are kept.
type Config struct {
	Dir string
	// MaxRecordings, MaxBytes and MaxAge bound what is kept: after each
	// recording the oldest go until all three hold. 0 = no bound of that
	// kind. MaxBytes also bounds one recording: past it the session's
	// audio is no longer written (events still are, and the trace says so).
	MaxRecordings int
	MaxBytes      int64
	MaxAge        time.Duration
}

// ErrConfig is a Config that cannot be used.
var ErrConfig = errors.New("record: bad config")

const tmpPrefix = ".tmp-"

// markerName is the file that marks a folder as a recording voxpipe made.
const markerName = ".voxpipe-recording"

// stampLayout is the UTC start time that begins a recording's name.
const stampLayout = "20060102T150405.000Z"

// ours says whether dir/name is a recording voxpipe made: a finished one
// (TIME-ID) or, with tmp, an unfinished one (.tmp-ID), holding the
// marker as a regular file (not a link to one elsewhere).
func ours(dir, name string, tmp bool) bool {
	if tmp {
		if !strings.HasPrefix(name, tmpPrefix) || len(name) == len(tmpPrefix) {
			return false
		}
	} else {
		stamp, id, ok := strings.Cut(name, "Z-")
		if !ok || id == "" {
			return false
		}
		if _, err := time.Parse(stampLayout, stamp+"Z"); err != nil {
			return false
		}
	}
	fi, err := os.Lstat(filepath.Join(dir, name, markerName))
	return err == nil && fi.Mode().IsRegular()
}

// Recorder makes Sessions in Config.Dir.
type Recorder struct {
	cfg Config
	log zerolog.Logger
	mu  sync.Mutex // serialises retention passes
}

// New prepares dir (it is created if missing) and removes the unfinished
// recordings a crash left there.
func New(cfg Config, log zerolog.Logger) (*Recorder, error) {
	if cfg.Dir == "" {
		return nil, fmt.Errorf("%w: no folder", ErrConfig)
	}
	if cfg.MaxRecordings < 0 || cfg.MaxBytes < 0 || cfg.MaxAge < 0 {
		return nil, fmt.Errorf("%w: negative limit", ErrConfig)
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	entries, err := os.ReadDir(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() && ours(cfg.Dir, e.Name(), true) {
			if err := os.RemoveAll(filepath.Join(cfg.Dir, e.Name())); err != nil {
				log.Warn().Err(err).Str("dir", e.Name()).Msg("record: cannot remove an unfinished recording")
			}
		}
	}
	return &Recorder{cfg: cfg, log: log}, nil
}

// Session is one session's recording.
type Session struct {
	r       *Recorder
	id      string
	tmp     string
	started time.Time

	mu      sync.Mutex // guards everything below
	in, out *wavFile
	events  *os.File
	ev      *bufio.Writer
	enc     *json.Encoder
	bytes   int64 // audio written, for Config.MaxBytes
	full    bool  // MaxBytes reached: audio is no longer written
	err     error // the first write error; the recording is dropped at Close
	closed  bool
}

// Start begins a recording for session id: in.wav at inRate, out.wav at
// outRate.
func (r *Recorder) Start(id string, inRate, outRate int) (*Session, error) {
	if strings.ContainsAny(id, `/\`) || id == "" || strings.HasPrefix(id, ".") {
		return nil, fmt.Errorf("%w: session id %q", ErrConfig, id)
	}
	tmp := filepath.Join(r.cfg.Dir, tmpPrefix+id)
	if err := os.Mkdir(tmp, 0o750); err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	s := &Session{r: r, id: id, tmp: tmp, started: time.Now()}
	err := os.WriteFile(filepath.Join(tmp, markerName), []byte("a voxpipe recording (internal/record): retention may remove this folder\n"), 0o640) //nolint:gosec // not secret
	if err != nil {
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("record: %w", err)
	}
	if s.in, err = createWAV(filepath.Join(tmp, "in.wav"), inRate); err == nil {
		if s.out, err = createWAV(filepath.Join(tmp, "out.wav"), outRate); err == nil {
			s.events, err = os.OpenFile(filepath.Join(tmp, "events.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o640) //nolint:gosec // the name is ours
		}
	}
	if err != nil {
		s.discard()
		return nil, fmt.Errorf("record: %w", err)
	}
	s.ev = bufio.NewWriter(s.events)
	s.enc = json.NewEncoder(s.ev)
	return s, nil
}

// In records audio the client sent.
func (s *Session) In(pcm []int16) { s.audio(s.in, pcm) }

// Out records audio the server sent.
func (s *Session) Out(pcm []int16) { s.audio(s.out, pcm) }

func (s *Session) audio(w *wavFile, pcm []int16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.err != nil || s.full {
		return
	}
	n := int64(2 * len(pcm))
	if max := s.r.cfg.MaxBytes; max > 0 && s.bytes+n > max {
		s.full = true
		s.writeEvent("note", map[string]any{"note": "recording reached record.max_bytes: audio from here on is not recorded"})
		return
	}
	s.bytes += n
	if err := w.write(pcm); err != nil {
		s.err = err
	}
}

// Event records one event; dir is "in" (from the client) or "out".
func (s *Session) Event(dir string, ev any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.err != nil {
		return
	}
	s.writeEvent(dir, ev)
}

func (s *Session) writeEvent(dir string, ev any) {
	line := struct {
		Ms    float64 `json:"ms"` // since the recording began
		Dir   string  `json:"dir"`
		Event any     `json:"event"`
	}{float64(time.Since(s.started).Microseconds()) / 1000, dir, ev}
	if err := s.enc.Encode(line); err != nil {
		s.err = err
	}
}

// Close finishes the recording: the files are completed and synced, the
// folder gets its final name (returned), and retention runs. A recording
// that failed to write is removed and its error returned.
func (s *Session) Close() (string, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return "", nil
	}
	s.closed = true
	err := s.err
	for _, f := range []func() error{s.in.close, s.out.close, s.ev.Flush, s.events.Sync, s.events.Close} {
		if e := f(); e != nil && err == nil {
			err = e
		}
	}
	s.mu.Unlock()
	if err != nil {
		_ = os.RemoveAll(s.tmp)
		return "", fmt.Errorf("record: session %s: %w", s.id, err)
	}
	final := filepath.Join(s.r.cfg.Dir, s.started.UTC().Format(stampLayout)+"-"+s.id)
	if err := os.Rename(s.tmp, final); err != nil {
		_ = os.RemoveAll(s.tmp)
		return "", fmt.Errorf("record: %w", err)
	}
	if d, err := os.Open(s.r.cfg.Dir); err == nil { // the rename itself
		_ = d.Sync()
		_ = d.Close()
	}
	s.r.retain()
	return final, nil
}

// discard removes a recording that could not start.
func (s *Session) discard() {
	for _, w := range []*wavFile{s.in, s.out} {
		if w != nil {
			_ = w.f.Close()
		}
	}
	if s.events != nil {
		_ = s.events.Close()
	}
	_ = os.RemoveAll(s.tmp)
}

// retain deletes the oldest finished recordings until the folder is within
// the limits.
func (r *Recorder) retain() {
	r.mu.Lock()
	defer r.mu.Unlock()
	type rec struct {
		name  string
		mod   time.Time
		bytes int64
	}
	entries, err := os.ReadDir(r.cfg.Dir)
	if err != nil {
		r.log.Warn().Err(err).Msg("record: retention")
		return
	}
	var recs []rec
	var total int64
	for _, e := range entries {
		if !e.IsDir() || !ours(r.cfg.Dir, e.Name(), false) {
			continue // not a recording: never counted, never removed
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		rc := rec{name: e.Name(), mod: info.ModTime()}
		_ = filepath.WalkDir(filepath.Join(r.cfg.Dir, e.Name()), func(_ string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if fi, err := d.Info(); err == nil {
					rc.bytes += fi.Size()
				}
			}
			return nil
		})
		total += rc.bytes
		recs = append(recs, rc)
	}
	// Oldest first: the names start with the start time.
	slices.SortFunc(recs, func(a, b rec) int { return strings.Compare(a.name, b.name) })
	now := time.Now()
	for len(recs) > 0 {
		old := recs[0]
		over := (r.cfg.MaxRecordings > 0 && len(recs) > r.cfg.MaxRecordings) ||
			(r.cfg.MaxBytes > 0 && total > r.cfg.MaxBytes) ||
			(r.cfg.MaxAge > 0 && now.Sub(old.mod) > r.cfg.MaxAge)
		if !over {
			break
		}
		if err := os.RemoveAll(filepath.Join(r.cfg.Dir, old.name)); err != nil {
			r.log.Warn().Err(err).Str("recording", old.name).Msg("record: cannot remove an old recording")
			break
		}
		total -= old.bytes
		recs = recs[1:]
	}
}

// wavFile is a mono PCM16 WAV written as it grows; close fills in the sizes.
type wavFile struct {
	f    *os.File
	w    *bufio.Writer
	data uint32 // bytes of samples written
	buf  []byte
}

func createWAV(path string, rate int) (*wavFile, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o640) //nolint:gosec // the name is ours
	if err != nil {
		return nil, err
	}
	w := &wavFile{f: f, w: bufio.NewWriterSize(f, 32<<10)}
	if _, err := w.w.Write(wavHeader(rate, 0)); err != nil {
		_ = f.Close()
		return nil, err
	}
	return w, nil
}

func (w *wavFile) write(pcm []int16) error {
	if uint64(w.data)+uint64(2*len(pcm)) > 1<<32-64 {
		return errors.New("wav over 4 GiB")
	}
	w.buf = w.buf[:0]
	for _, v := range pcm {
		w.buf = binary.LittleEndian.AppendUint16(w.buf, uint16(v)) //nolint:gosec // the bits of a sample
	}
	w.data += uint32(len(w.buf)) //nolint:gosec // bounded above
	_, err := w.w.Write(w.buf)
	return err
}

func (w *wavFile) close() error {
	err := w.w.Flush()
	if err == nil {
		var size [4]byte
		binary.LittleEndian.PutUint32(size[:], 36+w.data)
		_, err = w.f.WriteAt(size[:], 4)
		if err == nil {
			binary.LittleEndian.PutUint32(size[:], w.data)
			_, err = w.f.WriteAt(size[:], 40)
		}
	}
	if err == nil {
		err = w.f.Sync()
	}
	if e := w.f.Close(); err == nil {
		err = e
	}
	return err
}

// wavHeader is the 44-byte header of a mono PCM16 WAV with data bytes.
func wavHeader(rate int, data uint32) []byte {
	h := make([]byte, 0, 44)
	h = append(h, "RIFF"...)
	h = binary.LittleEndian.AppendUint32(h, 36+data)
	h = append(h, "WAVEfmt "...)
	h = binary.LittleEndian.AppendUint32(h, 16)
	h = binary.LittleEndian.AppendUint16(h, 1)              // PCM
	h = binary.LittleEndian.AppendUint16(h, 1)              // mono
	h = binary.LittleEndian.AppendUint32(h, uint32(rate))   //nolint:gosec // a sample rate
	h = binary.LittleEndian.AppendUint32(h, uint32(2*rate)) //nolint:gosec // bytes per second
	h = binary.LittleEndian.AppendUint16(h, 2)              // block align
	h = binary.LittleEndian.AppendUint16(h, 16)             // bits
	h = append(h, "data"...)
	return binary.LittleEndian.AppendUint32(h, data)
}
