// Command voxclient talks to a voxpipe server the way a smart speaker does:
// it streams a WAV file as microphone audio in real time over the WebSocket,
// prints the transcripts and the streamed answers, "plays" the answers (and
// saves them with --out), and reports every turn's latency. It is a thin
// command over internal/voiceclient.
//
//	voxclient --url ws://127.0.0.1:8080/ws --wav question.wav [--out answer.wav] [--json]
//	          [--turns N] [--encoding pcm16|opus] [--rate N] [--timeout 60s]
//
// With --protocol xiaozhi it plays an ESP32 xiaozhi device instead
// (docs/xiaozhi.md): the OTA check at --url (default
// http://127.0.0.1:8080/xiaozhi/ota/), the hello, 16 kHz 60 ms Opus up, in
// --mode auto (the mic is off while an answer plays), manual (the file is
// one push-to-talk press) or realtime, with --wake-word and --abort-after;
// the turns and --json are the same, measured the same way (the protocol
// carries no trace, so trace and the server_* fields are empty).
//
// It streams the whole file, then --silence of silence, and waits for the
// trace of every turn the file produced (--turns 1: stop after the first).
// With --json it prints one object at the end:
//
//	{"turns":[{"transcript":..., "answer":..., "trace":{...},
//	           "voice_to_voice_ms":..., "heard_ms":..., ...}, ...],
//	 "transcript":..., "answer":..., "heard_ms":..., ...}
//
// where the top-level fields repeat the first turn's. The client measures
// from the end of the last audible speech sample it sent before the turn's
// final transcript (audible: pipeline/audio's definition): voice_to_voice_ms
// to the first answer frame received, heard_ms to when the first audible
// answer sample plays, played as it arrives. Both include the server's
// endpointing wait and the network both ways: what a listener experiences.
// server_voice_to_voice_ms and server_heard_ms are the server's
// first_audio_out and first_audible_out − speech_end, where speech_end is
// when the server's VAD declared the end of speech.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/voxpipe/voxpipe/internal/voiceclient"
)

var version = "dev"

// errCommandLine marks a mistake on the command line (exit status 2).
var errCommandLine = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "voxclient:", err)
		if errors.Is(err, errCommandLine) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// output is what --json prints: every turn, and the first one's fields at
// the top level (what voxclient printed before it reported every turn).
type output struct {
	voiceclient.Turn
	Turns []voiceclient.Turn `json:"turns"`
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("voxclient", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := voiceclient.Config{ClientName: "voxclient", ClientVersion: version, KeepAudio: true}
	var wav, out, protocol, device string
	var asJSON bool
	xz := voiceclient.XiaozhiConfig{KeepAudio: true}
	fs.StringVar(&protocol, "protocol", "ws", "ws (voxpipe's /ws) or xiaozhi (play an ESP32 xiaozhi device: --url is its OTA address, http://HOST:PORT/xiaozhi/ota/, or its ws:// URL)")
	fs.StringVar(&xz.Mode, "mode", voiceclient.ModeAuto, "xiaozhi: listening mode auto, manual (the whole file is one push-to-talk press) or realtime")
	fs.StringVar(&xz.WakeWord, "wake-word", "", "xiaozhi: start like a wake-word device (a 2 s audio burst, then listen detect with this text)")
	fs.DurationVar(&xz.AbortAfter, "abort-after", 0, "xiaozhi: send abort this long after each answer's first audio (0: never)")
	fs.IntVar(&xz.Version, "xiaozhi-version", 0, "xiaozhi: binary framing 1, 2 or 3 (0: what the OTA answer says, else 1)")
	fs.StringVar(&xz.Token, "token", "", "xiaozhi: device token, when --url is the ws:// URL (the OTA answer gives it otherwise)")
	fs.StringVar(&cfg.URL, "url", "ws://127.0.0.1:8080/ws", "server WebSocket URL")
	fs.StringVar(&device, "device", "", "this device's id (the start message's device; xiaozhi: Device-Id, default 02:00:00:00:00:01): the server remembers the speaker of a device from one session to the next")
	fs.StringVar(&wav, "wav", "", "WAV file to speak (PCM16, any rate, mono or stereo); required")
	fs.StringVar(&out, "out", "", "save the answers' audio, one after another, to this WAV file")
	fs.BoolVar(&asJSON, "json", false, "print one JSON object with every turn's transcript, answer and latencies at the end")
	fs.IntVar(&cfg.Turns, "turns", 0, "stop after this many turns (0: stream the whole file and wait for every turn)")
	fs.StringVar(&cfg.Encoding, "encoding", "pcm16", "audio encoding on the wire: pcm16 or opus")
	fs.IntVar(&cfg.Rate, "rate", 0, "client sample rate in Hz, both ways (default: 16000 for pcm16, 48000 for opus)")
	fs.DurationVar(&cfg.Timeout, "timeout", voiceclient.DefaultTimeout, "give up when the last turn has not ended this long after the audio was sent")
	fs.DurationVar(&cfg.Tail, "silence", voiceclient.DefaultTail, "silence appended to the file so the server's endpointing fires")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: voxclient --wav F [--url ws://HOST:PORT/ws] [--out F] [--json] [--turns N] [--encoding pcm16|opus] [--rate N]")
		fmt.Fprintln(fs.Output(), "       voxclient --protocol xiaozhi --url http://HOST:PORT/xiaozhi/ota/ --wav F [--mode auto|manual|realtime] [--wake-word W] [--abort-after D] [--json]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %w", errCommandLine, err)
	}
	cfg.Device, xz.DeviceID = device, device
	if wav == "" {
		fs.Usage()
		return fmt.Errorf("%w: --wav is required", errCommandLine)
	}
	switch cfg.Encoding {
	case "pcm16":
		if cfg.Rate == 0 {
			cfg.Rate = 16000
		}
	case "opus":
		if cfg.Rate == 0 {
			cfg.Rate = 48000
		}
	default:
		return fmt.Errorf("%w: --encoding %q (want pcm16 or opus)", errCommandLine, cfg.Encoding)
	}
	if cfg.Turns < 0 {
		return fmt.Errorf("%w: --turns %d", errCommandLine, cfg.Turns)
	}
	if !asJSON {
		cfg.Log = stderr
	}
	var res *voiceclient.Result
	switch protocol {
	case "ws":
		speech, err := voiceclient.LoadWAV(wav, cfg.Rate)
		if err != nil {
			return err
		}
		if res, err = voiceclient.Run(ctx, cfg, speech); err != nil {
			return err
		}
	case "xiaozhi":
		urlSet := false
		fs.Visit(func(f *flag.Flag) { urlSet = urlSet || f.Name == "url" })
		if !urlSet {
			cfg.URL = "http://127.0.0.1:8080/xiaozhi/ota/"
		}
		speech, err := voiceclient.LoadWAV(wav, voiceclient.XiaozhiRate)
		if err != nil {
			return err
		}
		if strings.HasPrefix(cfg.URL, "ws://") || strings.HasPrefix(cfg.URL, "wss://") {
			xz.URL = cfg.URL
		} else {
			xz.OTAURL = cfg.URL
		}
		xz.Turns, xz.Tail, xz.Timeout, xz.Log = cfg.Turns, cfg.Tail, cfg.Timeout, cfg.Log
		if res, err = voiceclient.RunXiaozhi(ctx, xz, speech); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: --protocol %q (want ws or xiaozhi)", errCommandLine, protocol)
	}
	if len(res.Turns) == 0 {
		return errors.New("no turn: the server recognised no speech in the file")
	}
	if out != "" {
		var pcm []int16
		for _, t := range res.Turns {
			pcm = append(pcm, t.Audio...)
		}
		if err := voiceclient.SaveWAV(out, pcm, res.AudioRate); err != nil {
			return err
		}
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(output{Turn: res.Turns[0], Turns: res.Turns})
	}
	for _, t := range res.Turns {
		printSummary(stdout, t)
	}
	return nil
}

func printSummary(w io.Writer, t voiceclient.Turn) {
	marks := make([]string, 0, len(t.Trace))
	for name := range t.Trace {
		marks = append(marks, name)
	}
	sort.Slice(marks, func(i, j int) bool { return t.Trace[marks[i]] < t.Trace[marks[j]] })
	var b strings.Builder
	for _, name := range marks {
		fmt.Fprintf(&b, "  %-18s %8.1f ms\n", name, t.Trace[name])
	}
	fmt.Fprintf(w, "turn %d: %q\ntrace (ms since the server's speech_end):\n%s", t.Turn, t.Transcript, b.String())
	line := func(what string, ms *float64) {
		if ms != nil {
			fmt.Fprintf(w, "%s: %.0f ms\n", what, *ms)
		}
	}
	line("heard, client (first audible answer sample played - last speech sent)", t.HeardMs)
	line("voice-to-voice, client (first answer frame - last speech sent)", t.VoiceToVoiceMs)
	line("heard, server (first_audible_out - speech_end)", t.ServerHeardMs)
	line("voice-to-voice, server (first_audio_out - speech_end)", t.ServerVoiceToVoiceMs)
	fmt.Fprintf(w, "answer audio: %.1f s\n", t.AnswerAudioMs/1000)
}
