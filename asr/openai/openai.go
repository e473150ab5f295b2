// Package openai is an asr.Recognizer on an OpenAI-compatible
// transcription endpoint (POST {base_url}/audio/transcriptions), so a GPU
// box running a Whisper server (faster-whisper-server, whisper.cpp's
// server, vLLM, OpenAI itself) can take over recognition. The endpoint takes
// whole files, so the utterance is buffered and sent as one WAV when the
// pipeline's endpointer closes it; there are no partials. The trace's
// asr_final mark then measures the request.
package openai

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/voxpipe/voxpipe/asr"
)

// Config configures the recogniser.
type Config struct {
	BaseURL  string // the API root, e.g. http://gpu-box:8000/v1
	Model    string // e.g. whisper-1, Systran/faster-whisper-small
	APIKey   string // sent as a bearer token when set
	Language string // ISO-639-1 hint; "" = let the server detect
	Timeout  time.Duration
	// MaxSeconds bounds an utterance's audio (the request body).
	MaxSeconds int
	HTTPClient *http.Client
}

// Recognizer is safe for concurrent use.
type Recognizer struct {
	cfg      Config
	endpoint string
	where    string
	hc       *http.Client
}

// New checks cfg; it does not connect.
func New(cfg Config) (*Recognizer, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai asr: base_url %q: want http(s)://host[:port]/path", cfg.BaseURL)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.MaxSeconds <= 0 {
		cfg.MaxSeconds = 60
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	return &Recognizer{cfg: cfg, endpoint: strings.TrimSuffix(cfg.BaseURL, "/") + "/audio/transcriptions", where: u.Host, hc: hc}, nil
}

// Close releases idle connections.
func (r *Recognizer) Close() error {
	r.hc.CloseIdleConnections()
	return nil
}

// Start implements asr.Recognizer; any rate is taken (the WAV says it).
func (r *Recognizer) Start(ctx context.Context, sampleRate int) (asr.Stream, error) {
	if sampleRate <= 0 {
		return nil, asr.ErrSampleRate
	}
	return &stream{r: r, ctx: ctx, rate: sampleRate, results: make(chan asr.Result, 1),
		pcm: make([]int16, 0, sampleRate*4)}, nil
}

type stream struct {
	r       *Recognizer
	ctx     context.Context
	rate    int
	pcm     []int16
	closed  bool
	err     error
	results chan asr.Result
}

func (s *stream) Results() <-chan asr.Result { return s.results }

func (s *stream) Write(pcm []int16) error {
	if s.closed {
		return errors.New("openai asr: write after close")
	}
	if len(s.pcm)+len(pcm) > s.r.cfg.MaxSeconds*s.rate {
		return fmt.Errorf("openai asr: utterance longer than %d s", s.r.cfg.MaxSeconds)
	}
	s.pcm = append(s.pcm, pcm...)
	return nil
}

// Close sends the utterance and delivers the transcript as the final.
func (s *stream) Close() error {
	if s.closed {
		return s.err
	}
	s.closed = true
	defer close(s.results)
	text, err := s.r.transcribe(s.ctx, s.pcm, s.rate)
	if s.ctx.Err() != nil {
		return nil // cancelled: no final
	}
	s.err = err
	if err != nil {
		text = ""
	}
	s.results <- asr.Result{Text: text, Final: true, At: time.Now()}
	return err
}

// wav encodes mono PCM16 as a RIFF WAVE file.
func wav(pcm []int16, rate int) []byte {
	b := make([]byte, 0, 44+2*len(pcm))
	le := binary.LittleEndian
	b = append(b, "RIFF"...)
	b = le.AppendUint32(b, uint32(36+2*len(pcm)))
	b = append(b, "WAVEfmt "...)
	b = le.AppendUint32(b, 16)
	b = le.AppendUint16(b, 1) // PCM
	b = le.AppendUint16(b, 1) // mono
	b = le.AppendUint32(b, uint32(rate))
	b = le.AppendUint32(b, uint32(2*rate))
	b = le.AppendUint16(b, 2)
	b = le.AppendUint16(b, 16)
	b = append(b, "data"...)
	b = le.AppendUint32(b, uint32(2*len(pcm)))
	for _, v := range pcm {
		b = le.AppendUint16(b, uint16(v))
	}
	return b
}

func (r *Recognizer) transcribe(ctx context.Context, pcm []int16, rate int) (string, error) {
	if len(pcm) == 0 {
		return "", nil
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", "utterance.wav")
	_, _ = fw.Write(wav(pcm, rate))
	_ = mw.WriteField("model", r.cfg.Model)
	_ = mw.WriteField("response_format", "json")
	_ = mw.WriteField("temperature", "0")
	if r.cfg.Language != "" {
		_ = mw.WriteField("language", r.cfg.Language)
	}
	_ = mw.Close()
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.endpoint, &body)
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	if r.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+r.cfg.APIKey)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return "", fmt.Errorf("openai asr: %s: no answer within %v", r.where, r.cfg.Timeout)
		}
		return "", fmt.Errorf("openai asr: %s: %w", r.where, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("openai asr: %s: reading the answer: %w", r.where, err)
	}
	var out struct {
		Text  string `json:"text"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	jerr := json.Unmarshal(raw, &out)
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(raw))
		if jerr == nil && out.Error != nil {
			msg = out.Error.Message
		}
		msg, _, _ = strings.Cut(msg, "\n")
		return "", fmt.Errorf("openai asr: %s: HTTP %d: %s", r.where, resp.StatusCode, msg)
	}
	if jerr != nil {
		return "", fmt.Errorf("openai asr: %s: bad answer: %w", r.where, jerr)
	}
	return strings.TrimSpace(out.Text), nil
}
