package sphinx

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// SampleRate is the only rate the en-us acoustic model takes; the pipeline
// resamples everything else to it.
const SampleRate = 16000

// debianModelRoot is where pocketsphinx-en-us installs the US English model.
const debianModelRoot = "/usr/share/pocketsphinx/model/en-us"

// installHint is appended to every missing-file error.
const installHint = "apt-get install pocketsphinx-en-us"

// Config selects the models and the search. Exactly one of LM, JSGF and
// Keywords is set (or a search flag such as -keyphrase is given in Args).
type Config struct {
	ModelDir string // acoustic model (-hmm)
	Dict     string // pronunciation dictionary (-dict)
	LM       string // trigram LM (-lm); or
	JSGF     string // grammar file (-jsgf); or
	Keywords string // keyword list file (-kws), one phrase per line, optional /threshold/

	// FirstPassOnly runs only the fwdtree pass (-fwdflat no -bestpath no),
	// so the final hypothesis is ready tens of milliseconds after Close
	// instead of hundreds: see DefaultConfig.
	FirstPassOnly bool

	// Bestpath runs the lattice best-path pass (-bestpath) at the end of
	// the utterance. With FirstPassOnly it is the only pass after the
	// first: a few milliseconds, and better words (see DefaultConfig).
	Bestpath bool

	// PoolSize decoders are kept ready: New loads one and builds the rest
	// in the background, and a Start that takes an idle one starts the
	// build of a replacement. A Start that finds none loads its own.
	PoolSize int

	// PoolMaxIdle is how many returned decoders are kept idle at most
	// (at least PoolSize); more are freed. A Start builds no replacement
	// that the decoders in use would, once returned, leave to be freed.
	PoolMaxIdle int

	// WarmUp runs a short decode on every new decoder before its first
	// utterance.
	WarmUp bool

	// MaxHMMPerFrame caps the HMMs the first pass keeps active per frame
	// (-maxhmmpf): past it the beam narrows for that frame. 0 keeps
	// pocketsphinx's 30000, which real speech never reaches. The search is
	// most of live recognition's CPU; configs/default.yaml has the measured
	// trade-off.
	MaxHMMPerFrame int

	// PhoneLookahead is the phone loop's lookahead window in frames
	// (-pl_window): how far ahead a cheap phone-loop search predicts which
	// words may start, to prune the word search. 0 keeps pocketsphinx's 5.
	PhoneLookahead int

	// WordPenalty is the word insertion penalty (-wip), a probability
	// multiplied in for every word the search proposes; 0 keeps
	// pocketsphinx's 0.65. Lower means fewer, longer words.
	WordPenalty float64

	// SilenceProb is the probability of the silence word between words
	// (-silprob); 0 keeps pocketsphinx's 0.005. Higher lets the search
	// explain a pause or a noise as silence rather than as a short word.
	SilenceProb float64

	// BestpathLW is the language weight of the lattice best-path pass
	// (-bestpathlw); 0 keeps pocketsphinx's 9.5. It only changes the final
	// hypothesis, not the first pass's partials or cost.
	BestpathLW float64

	// CMNInit is the cepstral mean every decoder and session starts from:
	// comma-separated numbers, one per cepstral coefficient (13 for en-us),
	// as pocketsphinx's -cmninit takes them. "" keeps the model's.
	CMNInit string

	// NarrowbandCMNInit is the starting mean for sessions whose client
	// sends 8 kHz or less (telephone audio, upsampled by the pipeline): the
	// missing upper band shifts the cepstral mean a long way from
	// wideband speech's. "" uses CMNInit.
	NarrowbandCMNInit string

	// CMNWeight is how many 10 ms frames of history the starting mean of
	// an utterance counts as, i.e. how far the utterance's own speech moves
	// it; 0 keeps pocketsphinx's 500 (5 s).
	CMNWeight int

	// CMNUpdate, when > 0, re-estimates the mean every CMNUpdate frames
	// within an utterance (the starting mean's weight plus the frames
	// decoded so far), so the rest of the utterance is normalised by it.
	// 0 keeps pocketsphinx's schedule: within an utterance only every 3 s
	// of speech, so a short one is normalised entirely by its start mean.
	CMNUpdate int

	// Rescore rescores the final hypothesis's n-best list with a language
	// model (off when Rescore.Scorer is nil; see Rescore).
	Rescore Rescore

	// Args are extra pocketsphinx flags, e.g. {"-beam": "1e-48"}. They
	// override the flags derived from the fields above.
	Args map[string]string
}

// DefaultConfig returns the Debian en-us model with the full trigram LM,
// the first pass plus the lattice best-path pass, the pruning
// configs/default.yaml ships (MaxHMMPerFrame 4000, PhoneLookahead 3: the
// measured curve is in docs/asr.md), its silence probability (0.05) and one
// warm decoder.
//
// Why first pass only: latency is the product, and the final hypothesis is
// what the turn manager waits for after end of speech. The second and third
// passes (fwdflat, bestpath) run inside ps_end_utt over the whole utterance,
// so all their cost lands on the voice-to-voice path and grows with the
// utterance. Measured on this machine (2 shared cores), 20 ms chunks with
// a partial after each, a fresh decoder per set. "final" is Close, i.e.
// ps_end_utt + ps_get_hyp, median (max) on the decoding thread's CPU clock
// (wall time equals it when the core is free and only grows under load); "flite"
// is the 20 sentences of testdata/assistant_sentences.txt from the flite CLI:
//
//	set (ref words)   WER first-pass   WER 3-pass   final ms first-pass   final ms 3-pass
//	goforward (4)     0.0%             0.0%         8 (8)                 66 (66)
//	cards (21)        19.0%            23.8%        53 (96)               114 (194)
//	librivox (71)     26.8%            31.0%        16 (54)               214 (406)
//	flite slt (192)   9.9%             13.0%        28 (79)               136 (210)
//	flite rms (192)   5.2%             2.1%         27 (44)               177 (364)
//
// First-pass-only finalises in tens of milliseconds instead of hundreds
// (wall clock on the busy machine, medians: 10–86 ms vs 66–552 ms), and was
// as accurate or better on four of the five sets; only the rms voice lost
// (6 words of 192).
// Decoding cost while streaming is about the same (CPU RTF 0.16–0.43 vs
// 0.18–0.40). Set FirstPassOnly=false where accuracy on long dictation
// matters more than the turn's latency.
//
// One warm decoder: ps_init with the full LM takes 0.3–0.5 s and about 94 MB,
// so New pays it once and a second concurrent session pays it at its Start.
func DefaultConfig() Config {
	return Config{
		ModelDir:      filepath.Join(debianModelRoot, "en-us"),
		Dict:          filepath.Join(debianModelRoot, "cmudict-en-us.dict"),
		LM:            filepath.Join(debianModelRoot, "en-us.lm.bin"),
		FirstPassOnly: true,
		PoolSize:      1,
		WarmUp:        true,
		CMNInit:       MeasuredCMN,
		// The search settings configs/default.yaml ships (measured there):
		// the best-path pass and pruning.
		Bestpath:       true,
		MaxHMMPerFrame: 4000,
		PhoneLookahead: 3,
		SilenceProb:    0.05,
	}
}

// MeasuredCMN is the cepstral mean of real 16 kHz speech (pocketsphinx-
// testdata, Asterisk prompts, alsa-utils' voice; `voxpipe bench asr --cmn`,
// docs/asr.md): a session that starts from it decodes its first utterance
// like a warmed-up one. The model's own -cmninit (feat.params) is far from
// real voices and costs most of a first utterance (configs/default.yaml
// ships the same vector).
const MeasuredCMN = "45.85,-1.85,2.51,7.13,1.15,-1.18,-2.50,0.54,-1.82,-1.05,-4.48,-1.63,1.76"

// acousticModelFiles must all exist in ModelDir; mixture weights come as
// either sendump (Debian's en-us) or mixture_weights.
var acousticModelFiles = []string{"mdef", "means", "variances", "transition_matrices"}

// validate checks the config and that every file it names exists, so that
// pocketsphinx (which calls exit() on some load failures) never sees a
// missing file.
func (c Config) validate() error {
	searches := 0
	for _, s := range []string{c.LM, c.JSGF, c.Keywords} {
		if s != "" {
			searches++
		}
	}
	for _, flag := range []string{"-lm", "-jsgf", "-kws", "-keyphrase", "-fsg", "-allphone", "-lmctl"} {
		if _, ok := c.Args[flag]; ok {
			searches++
		}
	}
	if searches == 0 {
		return fmt.Errorf("%w: no search: set one of LM, JSGF or Keywords", ErrConfig)
	}
	if searches > 1 {
		return fmt.Errorf("%w: more than one search among LM, JSGF, Keywords and Args; set exactly one", ErrConfig)
	}
	if rate, ok := c.Args["-samprate"]; ok && rate != "16000" && rate != "16000.0" {
		return fmt.Errorf("%w: -samprate %s: only %d Hz is supported", ErrConfig, rate, SampleRate)
	}
	for _, v := range []string{c.CMNInit, c.NarrowbandCMNInit} {
		if _, err := parseCMN(v); err != nil {
			return err
		}
	}
	if err := c.Rescore.validate(); err != nil {
		return err
	}
	if c.BestpathLW < 0 {
		return fmt.Errorf("%w: BestpathLW %g is negative", ErrConfig, c.BestpathLW)
	}
	if c.SilenceProb < 0 || c.SilenceProb > 1 {
		return fmt.Errorf("%w: SilenceProb %g is outside 0..1", ErrConfig, c.SilenceProb)
	}
	if c.WordPenalty < 0 || c.WordPenalty > 1 {
		return fmt.Errorf("%w: WordPenalty %g is outside 0..1", ErrConfig, c.WordPenalty)
	}
	if c.CMNWeight < 0 || c.CMNUpdate < 0 {
		return fmt.Errorf("%w: CMNWeight %d / CMNUpdate %d is negative", ErrConfig, c.CMNWeight, c.CMNUpdate)
	}
	if c.PhoneLookahead < 0 {
		return fmt.Errorf("%w: PhoneLookahead %d is negative", ErrConfig, c.PhoneLookahead)
	}
	if c.MaxHMMPerFrame < 0 {
		return fmt.Errorf("%w: MaxHMMPerFrame %d is negative", ErrConfig, c.MaxHMMPerFrame)
	}
	if c.PoolSize < 0 || c.PoolMaxIdle < 0 {
		return fmt.Errorf("%w: PoolSize %d / PoolMaxIdle %d is negative", ErrConfig, c.PoolSize, c.PoolMaxIdle)
	}
	if c.ModelDir == "" || c.Dict == "" {
		return fmt.Errorf("%w: ModelDir and Dict are required", ErrConfig)
	}
	if st, err := os.Stat(c.ModelDir); err != nil || !st.IsDir() {
		return fmt.Errorf("%w: acoustic model dir %s (install it: %s)", ErrModelMissing, c.ModelDir, installHint)
	}
	for _, f := range acousticModelFiles {
		if err := fileExists(filepath.Join(c.ModelDir, f)); err != nil {
			return err
		}
	}
	if fileExists(filepath.Join(c.ModelDir, "sendump")) != nil && fileExists(filepath.Join(c.ModelDir, "mixture_weights")) != nil {
		return fmt.Errorf("%w: %s has neither sendump nor mixture_weights (install it: %s)", ErrModelMissing, c.ModelDir, installHint)
	}
	for _, f := range []string{c.Dict, c.LM, c.JSGF, c.Keywords} {
		if f == "" {
			continue
		}
		if err := fileExists(f); err != nil {
			return err
		}
	}
	return nil
}

// parseCMN reads a -cmninit style list; "" gives nil.
func parseCMN(s string) ([]float32, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	v := make([]float32, len(parts))
	for i, p := range parts {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 32)
		if err != nil {
			return nil, fmt.Errorf("%w: CMNInit value %d %q is not a number", ErrConfig, i+1, p)
		}
		v[i] = float32(f)
	}
	return v, nil
}

// ParseArgs splits "-flag value -flag value" into a map for Config.Args.
func ParseArgs(s string) (map[string]string, error) {
	f := strings.Fields(s)
	if len(f)%2 != 0 {
		return nil, fmt.Errorf("%w: extra flags %q: want -flag value pairs", ErrConfig, s)
	}
	m := make(map[string]string, len(f)/2)
	for i := 0; i < len(f); i += 2 {
		if !strings.HasPrefix(f[i], "-") {
			return nil, fmt.Errorf("%w: extra flags: %q is not a -flag", ErrConfig, f[i])
		}
		m[f[i]] = f[i+1]
	}
	return m, nil
}

func fileExists(path string) error {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%w: %s (install it: %s)", ErrModelMissing, path, installHint)
	case err != nil:
		return fmt.Errorf("%w: %s: %w", ErrModelMissing, path, err)
	case st.IsDir():
		return fmt.Errorf("%w: %s is a directory, want a file", ErrModelMissing, path)
	}
	return nil
}

// decoderArgs turns the config into pocketsphinx flag/value pairs, Args
// last and winning; sorted so the same config always gives the same flags.
func (c Config) decoderArgs() []string {
	flags := map[string]string{
		"-hmm":      c.ModelDir,
		"-dict":     c.Dict,
		"-samprate": "16000",
	}
	switch {
	case c.LM != "":
		flags["-lm"] = c.LM
	case c.JSGF != "":
		flags["-jsgf"] = c.JSGF
	case c.Keywords != "":
		flags["-kws"] = c.Keywords
	}
	if c.FirstPassOnly {
		flags["-fwdflat"] = "no"
	}
	if c.PhoneLookahead > 0 {
		flags["-pl_window"] = strconv.Itoa(c.PhoneLookahead)
	}
	if c.MaxHMMPerFrame > 0 {
		flags["-maxhmmpf"] = strconv.Itoa(c.MaxHMMPerFrame)
	}
	if c.WordPenalty > 0 {
		flags["-wip"] = strconv.FormatFloat(c.WordPenalty, 'g', -1, 64)
	}
	if c.SilenceProb > 0 {
		flags["-silprob"] = strconv.FormatFloat(c.SilenceProb, 'g', -1, 64)
	}
	flags["-bestpath"] = "no"
	if c.Bestpath {
		flags["-bestpath"] = "yes"
		if c.BestpathLW > 0 {
			flags["-bestpathlw"] = strconv.FormatFloat(c.BestpathLW, 'g', -1, 64)
		}
	}
	for k, v := range c.Args {
		flags[k] = v
	}
	keys := make([]string, 0, len(flags))
	for k := range flags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	args := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		args = append(args, k, flags[k])
	}
	return args
}
