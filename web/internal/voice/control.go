package voice

import (
	"encoding/json"
	"fmt"

	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/pipeline/audio"
)

// Wire names of the start message's encodings.
const (
	EncodingPCM16 = "pcm16"
	EncodingOpus  = "opus"
)

// ClientStart is the "start" type a client sends first.
const ClientStart = "start"

// Message is any JSON control message of docs/protocol.md; Type says which
// fields matter.
type Message struct {
	Type string `json:"type"`

	// start
	SampleRate       int        `json:"sample_rate"`
	Encoding         string     `json:"encoding"`
	OutputSampleRate int        `json:"output_sample_rate"`
	Client           ClientInfo `json:"client"`
	// Device is an id the client keeps for its device (at most
	// pipeline.MaxDeviceIDBytes): the server remembers the speaker heard at
	// it from one session to the next (pipeline.SpeakerMemory).
	Device string `json:"device"`
	// EchoCancelled false says the client plays the answer into its own
	// microphone uncancelled (a speaker without echo cancellation): the
	// server cancels that echo (pipeline.Config.DeviceEcho). Absent: true,
	// as browsers cancel their own.
	EchoCancelled *bool `json:"echo_cancelled"`
	// Resume, when set, is the session_token of a dropped session to
	// continue (docs/protocol.md).
	Resume string `json:"resume"`

	// playback_start, interrupt
	Turn     int     `json:"turn"`
	PlayedMs float64 `json:"played_ms"`
}

// ClientInfo names the client in a start message.
type ClientInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Problem is a client error: the code and message of an error event.
type Problem struct {
	Code, Message string
}

func (p *Problem) Error() string { return p.Code + ": " + p.Message }

func problem(code, format string, args ...any) *Problem {
	return &Problem{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Rules applies the control-message rules every transport shares: the
// first start is accepted (the transport decides what it configures), a
// second one is bad_message, and playback_start, interrupt and stop are
// refused with not_started until the session runs. One goroutine (the
// transport's reader) owns a Rules.
type Rules struct {
	startAccepted bool
	running       bool
}

// AcceptStart records that a start message was accepted; later ones are
// bad_message.
func (r *Rules) AcceptStart() { r.startAccepted = true }

// Running records that the session runs: control events are passed on.
func (r *Rules) Running() { r.running = true }

// Parse reads one control message. It returns either a start message for
// the transport to act on (start is true), a client event for the session,
// or a problem to report.
func (r *Rules) Parse(data []byte) (msg Message, ev *pipeline.ClientEvent, start bool, p *Problem) {
	if err := json.Unmarshal(data, &msg); err != nil {
		return msg, nil, false, problem(pipeline.CodeBadMessage, "not a JSON object of the protocol: %v", err)
	}
	switch msg.Type {
	case "":
		return msg, nil, false, problem(pipeline.CodeBadMessage, `message without "type"`)
	case ClientStart:
		if r.startAccepted {
			return msg, nil, false, problem(pipeline.CodeBadMessage, "session already started")
		}
		return msg, nil, true, nil
	case pipeline.ClientPlaybackStart, pipeline.ClientInterrupt, pipeline.ClientStop:
		if !r.running {
			return msg, nil, false, problem(pipeline.CodeNotStarted, "%s before the session started", msg.Type)
		}
		return msg, &pipeline.ClientEvent{Type: msg.Type, Turn: msg.Turn, PlayedMs: msg.PlayedMs}, false, nil
	}
	return msg, nil, false, problem(pipeline.CodeUnknownType, "unknown message type %q", msg.Type)
}

// ValidateStart checks a start message's audio format; it returns the
// encoding and the output rate, or a bad_format problem.
func ValidateStart(msg Message) (encoding string, outRate int, p *Problem) {
	if err := pipeline.CheckDevice(msg.Device); err != nil {
		return "", 0, problem(pipeline.CodeBadFormat, "%v", err)
	}
	encoding = msg.Encoding
	if encoding == "" {
		encoding = EncodingPCM16
	}
	outRate = msg.OutputSampleRate
	if outRate == 0 {
		outRate = msg.SampleRate
	}
	switch encoding {
	case EncodingPCM16:
		for _, rate := range []int{msg.SampleRate, outRate} {
			// The resampler takes 11025 too, but 20 ms of it is not whole
			// samples, and the pipeline frames audio in 20 ms.
			if rate < 8000 || rate > 48000 || !audio.ValidResampleRate(rate) || rate%50 != 0 {
				return "", 0, problem(pipeline.CodeBadFormat, "pcm16 sample rate %d Hz not supported (want 8000, 12000, 16000, 22050, 24000, 32000, 44100 or 48000)", rate)
			}
		}
	case EncodingOpus:
		for _, rate := range []int{msg.SampleRate, outRate} {
			if !audio.ValidOpusRate(rate) {
				return "", 0, problem(pipeline.CodeBadFormat, "opus sample rate %d Hz not supported (want 8000, 12000, 16000, 24000 or 48000)", rate)
			}
		}
	default:
		return "", 0, problem(pipeline.CodeBadFormat, "encoding %q not supported (want pcm16 or opus)", msg.Encoding)
	}
	return encoding, outRate, nil
}
