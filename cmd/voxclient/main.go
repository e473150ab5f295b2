// Command voxclient talks to a voxpipe server the way a smart speaker does:
// it streams a WAV file as microphone audio in real time over the WebSocket,
// prints the transcript and the streamed answer, "plays" the answer (and
// saves it with --out), and reports the turn's latency.
//
//	voxclient --url ws://127.0.0.1:8080/ws --wav question.wav [--out answer.wav] [--json]
//	          [--encoding pcm16|opus] [--rate N] [--timeout 60s]
//
// With --json it prints one object at the end:
//
//	{"transcript":..., "answer":..., "trace":{"asr_final":412.3,...},
//	 "voice_to_voice_ms":..., "server_voice_to_voice_ms":...}
//
// voice_to_voice_ms is measured by the client: arrival of the first answer
// audio frame minus the moment the client sent the last frame of speech in
// the file (the last frame within 30 dB of the loudest). It therefore
// includes the server's endpointing wait (pipeline.vad.end_silence_ms) and
// the network both ways, i.e. what a listener experiences.
// server_voice_to_voice_ms is the server's first_audio_out − speech_end,
// where speech_end is when the server's VAD declared the end of speech.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

var version = "dev"

// errCommandLine marks a mistake on the command line (exit status 2).
var errCommandLine = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "voxclient:", err)
		if errors.Is(err, errCommandLine) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("voxclient", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.url, "url", "ws://127.0.0.1:8080/ws", "server WebSocket URL")
	fs.StringVar(&o.wav, "wav", "", "WAV file to speak (PCM16, any rate, mono or stereo); required")
	fs.StringVar(&o.out, "out", "", "save the answer audio to this WAV file")
	fs.BoolVar(&o.json, "json", false, "print one JSON object with transcript, answer and latencies at the end")
	fs.StringVar(&o.encoding, "encoding", "pcm16", "audio encoding on the wire: pcm16 or opus")
	fs.IntVar(&o.rate, "rate", 0, "client sample rate in Hz, both ways (default: 16000 for pcm16, 48000 for opus)")
	fs.DurationVar(&o.timeout, "timeout", 60*time.Second, "give up when the turn has not ended this long after the audio was sent")
	fs.DurationVar(&o.tail, "silence", 1500*time.Millisecond, "silence appended to the file so the server's endpointing fires")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: voxclient --wav F [--url ws://HOST:PORT/ws] [--out F] [--json] [--encoding pcm16|opus] [--rate N]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %w", errCommandLine, err)
	}
	if o.wav == "" {
		fs.Usage()
		return fmt.Errorf("%w: --wav is required", errCommandLine)
	}
	switch o.encoding {
	case "pcm16":
		if o.rate == 0 {
			o.rate = 16000
		}
	case "opus":
		if o.rate == 0 {
			o.rate = 48000
		}
	default:
		return fmt.Errorf("%w: --encoding %q (want pcm16 or opus)", errCommandLine, o.encoding)
	}

	res, err := converse(ctx, o)
	if err != nil {
		return err
	}
	if o.json {
		return printJSON(os.Stdout, res)
	}
	printSummary(os.Stdout, res)
	return nil
}
