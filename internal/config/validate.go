package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/voxpipe/voxpipe/internal/logging"
)

// ChatTemplates lists the names llm.engine.chat_template accepts ("" means
// the model's own template): llm/engine/chat's Names (its tests check).
var ChatTemplates = []string{"", "chatml", "llama3", "llama2", "raw", "qwen2.5", "smollm2", "smollm3", "llama3.1", "gemma", "phi3"}

// Validate checks every value's range. Each problem is one line naming the
// key and where its value came from; all problems are reported together.
// Backend names are checked by the binary, which knows which are built in.
func (c *Config) Validate() error {
	v := validator{c: c}

	s := c.Server
	if _, port, err := net.SplitHostPort(s.Addr); err != nil {
		v.fail("server.addr", "want host:port, e.g. 127.0.0.1:8080 (got %q)", s.Addr)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		v.fail("server.addr", "port must be 0..65535 (got %q)", port)
	}
	v.capacity() // server.max_sessions, server.admission, server.admin_addr, telemetry
	v.intRange("server.max_frame_bytes", s.MaxFrameBytes, 1024, 16<<20)
	v.durRange("server.read_timeout", s.ReadTimeout, time.Second, time.Hour)
	v.durRange("server.idle_timeout", s.IdleTimeout, time.Second, time.Hour)

	if _, err := logging.ParseLevel(c.Log.Level); err != nil {
		v.fail("log.level", "want one of trace, debug, info, warn, error (got %q)", c.Log.Level)
	}
	v.oneOf("log.format", c.Log.Format, logging.FormatAuto, logging.FormatConsole, logging.FormatJSON)

	p := c.Pipeline
	v.intRange("pipeline.vad.start_ms", p.VAD.StartMs, 20, 2000)
	v.intRange("pipeline.vad.end_silence_ms", p.VAD.EndSilenceMs, 100, 10000)
	v.intRange("pipeline.vad.pre_roll_ms", p.VAD.PreRollMs, 0, 2000)
	v.floatRange("pipeline.vad.threshold_db", p.VAD.ThresholdDB, 1, 60)
	v.oneOf("pipeline.vad.detector", p.VAD.Detector, "energy", "silero")
	v.floatRange("pipeline.vad.speech_prob", p.VAD.SpeechProb, 0.2, 0.95)
	v.intRange("pipeline.barge_in_min_speech_ms", p.BargeInMinSpeechMs, 0, 5000)
	v.intRange("pipeline.backchannels.max_ms", p.Backchannels.MaxMs, 0, 10000)
	v.oneOf("pipeline.echo.mode", p.Echo.Mode, "auto", "on", "off")
	v.intRange("pipeline.echo.max_delay_ms", p.Echo.MaxDelayMs, 0, 1000)
	v.intRange("pipeline.echo.tail_ms", p.Echo.TailMs, 20, 1000)
	v.intRange("pipeline.denoise.max_db", p.Denoise.MaxDB, -60, 0)
	v.intRange("pipeline.max_tokens", p.MaxTokens, 1, 32768)
	v.floatRange("pipeline.temperature", float64(p.Temperature), 0, 2)
	v.intRange("pipeline.max_history_messages", p.MaxHistoryMessages, 0, 10000)
	v.intRange("pipeline.output_lead_ms", p.OutputLeadMs, 0, 5000)
	v.durRange("pipeline.playback_report_timeout", p.PlaybackReportTimeout, 0, time.Minute)
	v.oneOf("pipeline.early_start", p.EarlyStart, EarlyStartAuto, EarlyStartOn, EarlyStartOff)
	v.intRange("pipeline.early_start_stable_ms", p.EarlyStartStableMs, 0, 5000)
	v.durRange("pipeline.llm_stall_timeout", p.LLMStallTimeout, 0, 10*time.Minute)
	v.durRange("pipeline.max_turn", p.MaxTurn, 0, time.Hour)
	v.intRange("pipeline.apology (bytes)", len(p.Apology), 0, 200)
	v.oneOf("pipeline.turn.mode", p.Turn.Mode, "semantic", "silence")
	if p.Turn.Mode == "semantic" {
		v.intRange("pipeline.turn.min_silence_ms", p.Turn.MinSilenceMs, 20, 5000)
		v.intRange("pipeline.turn.max_silence_ms", p.Turn.MaxSilenceMs, p.Turn.MinSilenceMs, 10000)
		v.floatRange("pipeline.turn.threshold", p.Turn.Threshold, 0.001, 0.999)
		v.intRange("pipeline.turn.doubt_ms", p.Turn.DoubtMs, 0, 10000)
		v.floatRange("pipeline.turn.intonation_yield", p.Turn.IntonationYield, 0, 5)
		v.floatRange("pipeline.turn.intonation_hold", p.Turn.IntonationHold, 0, 5)
		v.intRange("pipeline.turn.remember_speakers", p.Turn.RememberSpeakers, 0, 1000000)
		v.intRange("pipeline.turn.remember_voices", p.Turn.RememberVoices, 0, 4096)
		v.durRange("pipeline.turn.remember_for", p.Turn.RememberFor, 0, 30*24*time.Hour)
		v.intRange("pipeline.turn.threads", p.Turn.Threads, 1, 64)
		v.floatRange("pipeline.turn.pause_final", p.Turn.PauseFinal, 0, 1)
		v.intRange("pipeline.turn.pause_final_ms", p.Turn.PauseFinalMs, 0, 10000)
		v.nonEmpty("pipeline.turn.model", p.Turn.Model)
	}

	v.nonEmpty("asr.backend", c.ASR.Backend)
	sp := c.ASR.Sphinx
	searches := 0
	for _, f := range []string{sp.LM, sp.JSGF, sp.Keywords} {
		if f != "" {
			searches++
		}
	}
	if searches > 1 {
		v.fail("asr.sphinx", "set at most one of lm, jsgf and keywords")
	}
	v.intRange("asr.sphinx.pool_size", sp.PoolSize, 0, 256)
	v.intRange("asr.sphinx.pool_max_idle", sp.PoolMaxIdle, 0, 256)
	v.intRange("asr.sphinx.max_hmm_per_frame", sp.MaxHMMPerFrame, 0, 1000000)
	v.intRange("asr.sphinx.phone_lookahead", sp.PhoneLookahead, 0, 100)
	v.intRange("asr.sphinx.cmn_weight", sp.CMNWeight, 0, 100000)
	v.intRange("asr.sphinx.cmn_update", sp.CMNUpdate, 0, 100000)
	if sp.WordPenalty < 0 || sp.WordPenalty > 1 {
		v.fail("asr.sphinx.word_penalty", "%g is outside 0..1", sp.WordPenalty)
	}
	if sp.SilenceProb < 0 || sp.SilenceProb > 1 {
		v.fail("asr.sphinx.silence_prob", "%g is outside 0..1", sp.SilenceProb)
	}
	if sp.BestpathLW < 0 || sp.BestpathLW > 100 {
		v.fail("asr.sphinx.bestpath_lw", "%g is outside 0..100", sp.BestpathLW)
	}
	for _, kv := range [][2]string{{"asr.sphinx.cmninit", sp.CMNInit}, {"asr.sphinx.cmninit_8k", sp.CMNInit8k}} {
		key, val := kv[0], kv[1]
		if val == "" {
			continue
		}
		for i, f := range strings.Split(val, ",") {
			if _, err := strconv.ParseFloat(strings.TrimSpace(f), 32); err != nil {
				v.fail(key, "value %d (%q) is not a number", i+1, f)
				break
			}
		}
	}
	if rs := sp.Rescore; rs.Model != "" {
		v.intRange("asr.sphinx.rescore.nbest", rs.NBest, 2, 100)
		v.intRange("asr.sphinx.rescore.timeout_ms", rs.TimeoutMs, 0, 10000)
		v.intRange("asr.sphinx.rescore.threads", rs.Threads, 1, 64)
		if rs.Weight < 0 {
			v.fail("asr.sphinx.rescore.weight", "%g is negative", rs.Weight)
		}
	}
	if f := strings.Fields(sp.ExtraArgs); len(f)%2 != 0 || (len(f) > 0 && !strings.HasPrefix(f[0], "-")) {
		v.fail("asr.sphinx.extra_args", "want \"-flag value\" pairs, got %q", sp.ExtraArgs)
	}

	rtc := c.Server.RTC
	if (rtc.UDPPortMin == 0) != (rtc.UDPPortMax == 0) || rtc.UDPPortMin > rtc.UDPPortMax {
		v.fail("server.rtc", "udp_port_min..udp_port_max must both be 0 or a range (got %d..%d)", rtc.UDPPortMin, rtc.UDPPortMax)
	}
	for i, s := range rtc.ICEServers {
		if len(s.URLs) == 0 {
			v.fail(fmt.Sprintf("server.rtc.ice_servers[%d].urls", i), "must not be empty")
		}
	}
	v.durRange("server.rtc.connect_timeout", rtc.ConnectTimeout, 0, 10*time.Minute)
	v.durRange("server.rtc.failed_timeout", rtc.FailedTimeout, 0, 10*time.Minute)

	v.durRange("server.auth.token_ttl", s.Auth.TokenTTL, time.Second, 24*time.Hour)
	for i, o := range s.AllowedOrigins {
		if o != "*" && !strings.Contains(o, "://") {
			v.fail(fmt.Sprintf("server.allowed_origins[%d]", i), "want scheme://host[:port] or \"*\" (got %q)", o)
		}
	}
	for i, h := range s.AllowedHosts {
		if h == "" || strings.ContainsAny(h, "/ *@") {
			v.fail(fmt.Sprintf("server.allowed_hosts[%d]", i), "want a host name or name:port, as browsers send it in Host (got %q)", h)
		}
	}
	v.durRange("server.drain_timeout", s.DrainTimeout, 0, time.Hour)
	v.intRange("server.limits.sessions_per_minute", s.Limits.SessionsPerMinute, 0, 1<<20)
	v.durRange("server.limits.max_session", s.Limits.MaxSession, 0, 7*24*time.Hour)
	v.durRange("server.limits.header_timeout", s.Limits.HeaderTimeout, 100*time.Millisecond, time.Hour)
	v.intRange("asr.replace_after", c.ASR.ReplaceAfter, 0, 1000)
	v.intRange("tts.replace_after", c.TTS.ReplaceAfter, 0, 1000)
	v.intRange("server.malloc.arenas", s.Malloc.Arenas, 0, 1024)
	v.intRange("server.malloc.mmap_threshold", s.Malloc.MmapThreshold, 0, 32<<20)
	v.durRange("server.malloc.trim_interval", s.Malloc.TrimInterval, 0, 24*time.Hour)
	v.durRange("server.resume.ttl", s.Resume.TTL, 0, 24*time.Hour)
	if s.Record.Enabled && s.Record.Dir == "" {
		v.fail("server.record.dir", "must be set when server.record.enabled is true")
	}
	v.intRange("server.record.max_recordings", s.Record.MaxRecordings, 0, 10000000)
	v.durRange("server.record.max_age", s.Record.MaxAge, 0, 10*365*24*time.Hour)
	if s.Record.MaxBytes < 0 {
		v.fail("server.record.max_bytes", "must not be negative")
	}
	v.intRange("server.resume.max_parked", s.Resume.MaxParked, 1, 1000000)
	v.durRange("server.limits.start_timeout", s.Limits.StartTimeout, 100*time.Millisecond, time.Hour)
	v.intRange("server.api.max_body_bytes", int(s.API.MaxBodyBytes), 1024, 1<<30)
	v.intRange("server.api.max_messages", s.API.MaxMessages, 1, 4096)
	v.intRange("server.api.max_stops", s.API.MaxStops, 0, 4)
	v.intRange("server.api.max_tokens", s.API.MaxTokens, 0, 1<<20)

	if xz := c.Server.Xiaozhi; xz.Enabled {
		for key, path := range map[string]string{"server.xiaozhi.ota_path": xz.OTAPath, "server.xiaozhi.ws_path": xz.WSPath} {
			if len(path) < 2 || path[0] != '/' {
				v.fail(key, "want an absolute path such as /xiaozhi/v1/ (got %q)", path)
			}
		}
		if xz.OTAPath == xz.WSPath {
			v.fail("server.xiaozhi.ws_path", "must differ from ota_path (both %q)", xz.WSPath)
		}
		if u := xz.WebSocketURL; u != "" && !strings.HasPrefix(u, "ws://") && !strings.HasPrefix(u, "wss://") {
			v.fail("server.xiaozhi.websocket_url", "want ws://HOST:PORT/PATH or wss://..., or empty (got %q)", u)
		}
		v.intRange("server.xiaozhi.protocol_version", xz.ProtocolVersion, 1, 3)
		v.oneOf("server.xiaozhi.devices", xz.Devices, "open", "allow_list")
		if xz.Devices == "allow_list" && len(xz.AllowedDevices) == 0 {
			v.fail("server.xiaozhi.allowed_devices", "devices is allow_list but the list is empty")
		}
		if xz.OutputRate != 16000 && xz.OutputRate != 24000 {
			v.fail("server.xiaozhi.output_rate", "want 16000 or 24000 (got %d)", xz.OutputRate)
		}
		v.durRange("server.xiaozhi.hello_timeout", xz.HelloTimeout, time.Second, time.Minute)
		v.durRange("server.xiaozhi.tts_start_lead", xz.TTSStartLead, 0, time.Second)
		v.durRange("server.xiaozhi.idle_timeout", xz.IdleTimeout, time.Second, 24*time.Hour)
		v.durRange("server.xiaozhi.mcp_timeout", xz.MCPTimeout, 10*time.Millisecond, time.Minute)
		v.durRange("server.xiaozhi.mcp_list_wait", xz.MCPListWait, 0, time.Minute)
		if u := xz.VisionURL; u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			v.fail("server.xiaozhi.vision_url", "want http://HOST/PATH or https://... (the device uploads photos to it), or empty (got %q)", u)
		}
	}

	v.nonEmpty("llm.backend", c.LLM.Backend)
	e := c.LLM.Engine
	if c.LLM.Backend == "engine" {
		v.nonEmpty("llm.engine.model", e.Model)
	}
	v.intRange("llm.engine.threads", e.Threads, 0, 1024)
	if e.ContextSize != 0 {
		v.intRange("llm.engine.context_size", e.ContextSize, 16, 1<<20)
	}
	v.oneOf("llm.engine.chat_template", e.ChatTemplate, ChatTemplates...)
	v.floatRange("llm.engine.temperature", float64(e.Temperature), 0, 2)
	v.intRange("llm.engine.top_k", e.TopK, 0, 1<<20)
	v.floatRange("llm.engine.top_p", float64(e.TopP), 0, 1)
	v.floatRange("llm.engine.min_p", float64(e.MinP), 0, 1)
	v.floatRange("llm.engine.repeat_penalty", float64(e.RepeatPenalty), 0, 10)
	v.intRange("llm.engine.max_tokens", e.MaxTokens, 0, 1<<20)
	v.intRange("llm.engine.sequences", e.Sequences, 1, 64)
	v.intRange("llm.engine.queue_size", e.QueueSize, 1, 4096)

	v.nonEmpty("tts.backend", c.TTS.Backend)
	v.nonEmpty("tts.flite.voice", c.TTS.Flite.Voice)
	v.floatRange("tts.flite.rate", c.TTS.Flite.Rate, 0.25, 4)
	v.floatRange("tts.flite.pitch", c.TTS.Flite.Pitch, 0, 500)
	v.nonEmpty("tts.espeak.voice", c.TTS.Espeak.Voice)
	v.intRange("tts.espeak.rate", c.TTS.Espeak.Rate, 80, 450)
	v.intRange("tts.espeak.pitch", c.TTS.Espeak.Pitch, 0, 100)

	v.remote() // remote.go
	k := c.Knowledge
	if k.Enabled && len(k.Sources) == 0 {
		v.fail("knowledge.sources", "must not be empty when knowledge.enabled is true (folders of .txt/.md/.jsonl files or \"dictionary\")")
	}
	for i, s := range k.Sources {
		if strings.TrimSpace(s) == "" {
			v.fail(fmt.Sprintf("knowledge.sources[%d]", i), "must not be empty")
		}
	}
	v.intRange("knowledge.top_k", k.TopK, 1, 32)
	v.floatRange("knowledge.min_score", k.MinScore, 0, 100)
	v.intRange("knowledge.max_context_tokens", k.MaxContextTokens, 0, 1<<16)
	v.tools()
	v.cache()

	return errors.Join(v.errs...)
}

type validator struct {
	c    *Config
	errs []error
}

func (v *validator) fail(key, format string, args ...any) {
	v.errs = append(v.errs, newProblem(ErrInvalid, "%s: %s: %s", v.c.Origin(key), key, fmt.Sprintf(format, args...)))
}

func (v *validator) intRange(key string, n, lo, hi int) {
	if n < lo || n > hi {
		v.fail(key, "must be %d..%d (got %d)", lo, hi, n)
	}
}

func (v *validator) floatRange(key string, f, lo, hi float64) {
	if !(f >= lo && f <= hi) { // also rejects NaN
		v.fail(key, "must be %g..%g (got %g)", lo, hi, f)
	}
}

func (v *validator) durRange(key string, d, lo, hi time.Duration) {
	if d < lo || d > hi {
		v.fail(key, "must be %v..%v (got %v)", lo, hi, d)
	}
}

func (v *validator) nonEmpty(key, s string) {
	if s == "" {
		v.fail(key, "must not be empty")
	}
}

func (v *validator) oneOf(key, s string, allowed ...string) {
	for _, a := range allowed {
		if s == a {
			return
		}
	}
	v.fail(key, "want one of %q (got %q)", allowed, s)
}

// BuiltinTools are the names tools.builtin takes.
var BuiltinTools = []string{"time", "timers"}

func (v *validator) tools() {
	t := v.c.Tools
	for i, b := range t.Builtin {
		v.oneOf(fmt.Sprintf("tools.builtin[%d]", i), b, BuiltinTools...)
	}
	if t.TimeZone != "" {
		if _, err := time.LoadLocation(t.TimeZone); err != nil {
			v.fail("tools.time_zone", "%q is not a time zone this machine knows (an IANA name such as Europe/Paris): %v", t.TimeZone, err)
		}
	}
	v.intRange("tools.max_rounds", t.MaxRounds, 1, 16)
	v.durRange("tools.call_timeout", t.CallTimeout, 100*time.Millisecond, 5*time.Minute)
	v.intRange("tools.max_result_bytes", t.MaxResultBytes, 256, 1<<20)
	v.durRange("tools.filler_after", t.FillerAfter, 0, time.Minute)
	v.durRange("tools.filler_every", t.FillerEvery, 0, time.Minute)
	v.durRange("tools.notice_hold", t.NoticeHold, time.Second, 7*24*time.Hour)
	for i, f := range t.Fillers {
		if strings.TrimSpace(f) == "" {
			v.fail(fmt.Sprintf("tools.fillers[%d]", i), "must not be empty")
		}
	}
	for server := range t.MCPAllow {
		if t.MCPConfig == "" {
			v.fail("tools.mcp_allow."+server, "is set but tools.mcp_config names no MCP servers file")
		}
	}
}

func (v *validator) cache() {
	c := v.c.Cache
	v.durRange("cache.ttl", c.TTL, 0, 365*24*time.Hour)
	v.floatRange("cache.jitter", c.Jitter, 0, 1)
	v.intRange("cache.max_entries", c.MaxEntries, 0, 10_000_000)
	if c.MaxAudioBytes < 0 {
		v.fail("cache.max_audio_bytes", "must be 0 (no bound) or more, not %d", c.MaxAudioBytes)
	}
	v.floatRange("cache.threshold", c.Threshold, 0, 1)
	if c.Enabled && c.Preload != "" {
		if _, err := os.Stat(c.Preload); err != nil {
			v.fail("cache.preload", "%v", err)
		}
	}
}
