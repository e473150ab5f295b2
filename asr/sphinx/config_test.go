package sphinx

import (
	"errors"
	"slices"
	"testing"
)

// flagValue returns the value decoderArgs gives flag, and whether it is there.
func flagValue(args []string, flag string) (string, bool) {
	for i := 0; i+1 < len(args); i += 2 {
		if args[i] == flag {
			return args[i+1], true
		}
	}
	return "", false
}

// TestPruningFlags: MaxHMMPerFrame and BestpathLW reach pocketsphinx, 0
// leaves its own defaults, BestpathLW only with the best-path pass, and
// Args still win.
func TestPruningFlags(t *testing.T) {
	c := DefaultConfig()
	c.Bestpath = true
	c.MaxHMMPerFrame, c.BestpathLW, c.PhoneLookahead, c.WordPenalty, c.SilenceProb = 4000, 11, 3, 0.2, 0.05
	args := c.decoderArgs()
	if v, _ := flagValue(args, "-silprob"); v != "0.05" {
		t.Errorf("-silprob = %q, want 0.05 (%v)", v, args)
	}
	if v, _ := flagValue(args, "-wip"); v != "0.2" {
		t.Errorf("-wip = %q, want 0.2 (%v)", v, args)
	}
	if v, _ := flagValue(args, "-pl_window"); v != "3" {
		t.Errorf("-pl_window = %q, want 3 (%v)", v, args)
	}
	if v, _ := flagValue(args, "-maxhmmpf"); v != "4000" {
		t.Errorf("-maxhmmpf = %q, want 4000 (%v)", v, args)
	}
	if v, _ := flagValue(args, "-bestpathlw"); v != "11" {
		t.Errorf("-bestpathlw = %q, want 11 (%v)", v, args)
	}

	c.Bestpath = false
	if _, ok := flagValue(c.decoderArgs(), "-bestpathlw"); ok {
		t.Errorf("-bestpathlw without the best-path pass: %v", c.decoderArgs())
	}

	c.MaxHMMPerFrame, c.BestpathLW, c.PhoneLookahead, c.WordPenalty, c.SilenceProb = 0, 0, 0, 0, 0
	c.Bestpath = true
	args = c.decoderArgs()
	for _, f := range []string{"-maxhmmpf", "-bestpathlw", "-pl_window", "-wip", "-silprob"} {
		if slices.Contains(args, f) {
			t.Errorf("%s set although 0 keeps pocketsphinx's default: %v", f, args)
		}
	}

	c.MaxHMMPerFrame = 4000
	c.Args = map[string]string{"-maxhmmpf": "2500"}
	if v, _ := flagValue(c.decoderArgs(), "-maxhmmpf"); v != "2500" {
		t.Errorf("Args did not override MaxHMMPerFrame: -maxhmmpf = %q", v)
	}

	for _, bad := range []Config{{MaxHMMPerFrame: -1}, {BestpathLW: -2}, {WordPenalty: 1.5}, {SilenceProb: -0.1}, {CMNWeight: -1}, {CMNUpdate: -5}} {
		base := DefaultConfig()
		base.MaxHMMPerFrame, base.BestpathLW, base.WordPenalty = bad.MaxHMMPerFrame, bad.BestpathLW, bad.WordPenalty
		base.SilenceProb, base.CMNWeight, base.CMNUpdate = bad.SilenceProb, bad.CMNWeight, bad.CMNUpdate
		if err := base.validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: validate = %v, want ErrConfig", bad, err)
		}
	}
}
