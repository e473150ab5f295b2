// Package openai is a tts.Synthesizer on an OpenAI-compatible speech
// endpoint (POST {base_url}/audio/speech), so a GPU box running a Kokoro or
// Piper server (Kokoro-FastAPI, openedai-speech, OpenAI itself) can take
// over synthesis. It asks for raw PCM ("response_format": "pcm", 16-bit
// little-endian mono at SampleRate, 24 kHz for OpenAI and Kokoro) and
// passes the audio on as the response body streams in; a WAV answer is
// accepted too (its header is skipped).
package openai

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"

	"github.com/voxpipe/voxpipe/tts"
	"github.com/voxpipe/voxpipe/tts/stream"
)

// Config configures the synthesiser.
type Config struct {
	BaseURL    string // the API root, e.g. http://gpu-box:8880/v1
	Model      string // tts-1, kokoro, ...
	Voice      string // alloy, af_heart, ...
	APIKey     string // sent as a bearer token when set
	SampleRate int    // of the server's PCM; 0 = 24000
	Speed      float64
	// Timeout bounds the wait for the answer's first bytes and every gap
	// between reads after that.
	Timeout    time.Duration
	HTTPClient *http.Client
}

// Synthesizer is safe for concurrent use.
type Synthesizer struct {
	cfg      Config
	endpoint string
	where    string
	hc       *http.Client
}

// New checks cfg; it does not connect.
func New(cfg Config) (*Synthesizer, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai tts: base_url %q: want http(s)://host[:port]/path", cfg.BaseURL)
	}
	if cfg.Voice == "" {
		return nil, errors.New("openai tts: no voice")
	}
	if cfg.SampleRate == 0 {
		cfg.SampleRate = 24000
	}
	if cfg.Speed == 0 {
		cfg.Speed = 1
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	return &Synthesizer{cfg: cfg, endpoint: strings.TrimSuffix(cfg.BaseURL, "/") + "/audio/speech", where: u.Host, hc: hc}, nil
}

// SampleRate implements tts.Synthesizer.
func (s *Synthesizer) SampleRate() int { return s.cfg.SampleRate }

// Close releases idle connections.
func (s *Synthesizer) Close() error {
	s.hc.CloseIdleConnections()
	return nil
}

// chunkBytes is how much audio is passed on at once at most (50 ms at
// 24 kHz); smaller reads go on as they come.
const chunkBytes = 2400

// Synthesize implements tts.Synthesizer. The server gives no word timings,
// so the one word mark says the whole text was heard with the last sample.
func (s *Synthesizer) Synthesize(ctx context.Context, text string, out chan<- tts.Chunk) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if strings.IndexFunc(text, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) }) < 0 {
		return nil
	}
	body, _ := json.Marshal(map[string]any{"model": s.cfg.Model, "input": text, "voice": s.cfg.Voice,
		"response_format": "pcm", "speed": s.cfg.Speed})
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	errQuiet := fmt.Errorf("openai tts: %s: no audio for %v", s.where, s.cfg.Timeout)
	watch := time.AfterFunc(s.cfg.Timeout, func() { cancel(errQuiet) })
	defer watch.Stop()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, s.endpoint, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if s.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+s.cfg.APIKey)
	}
	fail := func(what string, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(context.Cause(rctx), errQuiet) {
			return errQuiet
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("openai tts: %s: %s: %w", s.where, what, err)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return fail("request", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
		var e struct {
			Error any `json:"error"`
		}
		msg := strings.TrimSpace(string(raw))
		if json.Unmarshal(raw, &e) == nil && e.Error != nil {
			if m, ok := e.Error.(map[string]any); ok && m["message"] != nil {
				msg = fmt.Sprint(m["message"])
			} else if s, ok := e.Error.(string); ok {
				msg = s
			}
		}
		msg, _, _ = strings.Cut(msg, "\n")
		return fmt.Errorf("openai tts: %s: HTTP %d: %s", s.where, resp.StatusCode, msg)
	}
	isWAV := strings.Contains(resp.Header.Get("Content-Type"), "wav")
	buf := make([]byte, chunkBytes+1)
	have := 0 // bytes in buf not yet passed on
	total := 0
	header := isWAV
	// The watch counts only the server's time, not a wait for the reader
	// (the pipeline paces audio in real time).
	send := func(c tts.Chunk) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !watch.Stop() && errors.Is(context.Cause(rctx), errQuiet) {
			return errQuiet
		}
		defer watch.Reset(s.cfg.Timeout)
		select {
		case out <- c:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// The server's audio is shaped like every engine's (tts/stream): its
	// leading silence dropped, long pauses cut, the mark moved to match.
	w := stream.NewWriter(stream.Config{SampleRate: s.cfg.SampleRate}, send)
	for {
		n, rerr := resp.Body.Read(buf[have:chunkBytes])
		have += n
		if n > 0 {
			watch.Reset(s.cfg.Timeout)
		}
		if header {
			if off, ok := wavData(buf[:have]); ok {
				copy(buf, buf[off:have])
				have -= off
				header = false
			} else if have >= chunkBytes {
				return fmt.Errorf("openai tts: %s: WAV answer without a data chunk", s.where)
			}
		}
		if !header && have >= 2 {
			use := have &^ 1
			pcm := make([]int16, use/2)
			for i := range pcm {
				pcm[i] = int16(binary.LittleEndian.Uint16(buf[2*i:]))
			}
			copy(buf, buf[use:have])
			have -= use
			total += len(pcm)
			if err := w.Write(pcm, nil); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			if total == 0 {
				return nil
			}
			// The text is heard when the last sample has played.
			if err := w.Write(nil, []tts.WordMark{{TextEnd: len(text), EndSample: total}}); err != nil {
				return err
			}
			return w.Close()
		}
		if rerr != nil {
			if total > 0 {
				return fail("connection lost mid-audio", rerr)
			}
			return fail("reading the answer", rerr)
		}
	}
}

// wavData returns the offset of a WAV's sample data, once the header up to
// the data chunk is in b.
func wavData(b []byte) (int, bool) {
	if len(b) < 12 {
		return 0, false
	}
	off := 12
	for off+8 <= len(b) {
		size := int(binary.LittleEndian.Uint32(b[off+4:]))
		if string(b[off:off+4]) == "data" {
			return off + 8, true
		}
		off += 8 + size + size&1
	}
	return 0, false
}
