//go:build cgo

package sphinx

/*
#cgo pkg-config: pocketsphinx sphinxbase
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pocketsphinx.h>
#include <sphinxbase/err.h>
#include <sphinxbase/feat.h>
#include <sphinxbase/cmn.h>

_Static_assert(sizeof(mfcc_t) == sizeof(float), "sphinxbase built with FIXED_POINT");

// vp_err holds the first ERROR/FATAL message logged on this OS thread since
// the last vp_err_clear. A cgo call runs on one thread from start to end, so
// clearing, calling pocketsphinx and copying the message out within one C
// wrapper keeps concurrent decoders from seeing each other's errors.
static __thread char vp_err[256];

static void vp_log(void *user_data, err_lvl_t lvl, const char *fmt, ...) {
	(void)user_data;
	if (lvl < ERR_ERROR || vp_err[0] != '\0') {
		return;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(vp_err, sizeof vp_err, fmt, ap);
	va_end(ap);
}

static void vp_install_log(void) {
	// NULL disables the FILE used for ps_init's configuration dump; the
	// callback catches everything that goes through err_msg.
	err_set_logfp(NULL);
	err_set_callback(vp_log, NULL);
}

static void vp_err_take(char *dst, size_t n) {
	if (n == 0) {
		return;
	}
	strncpy(dst, vp_err, n - 1);
	dst[n - 1] = '\0';
	vp_err[0] = '\0';
}

static ps_decoder_t *vp_init(int argc, char **argv, int *stage, char *err, size_t errn) {
	vp_err[0] = '\0';
	cmd_ln_t *cfg = cmd_ln_parse_r(NULL, ps_args(), argc, argv, TRUE);
	if (cfg == NULL) {
		*stage = 1;
		vp_err_take(err, errn);
		return NULL;
	}
	ps_decoder_t *ps = ps_init(cfg);
	// ps_init keeps its own reference to the config.
	cmd_ln_free_r(cfg);
	if (ps == NULL) {
		*stage = 2;
		vp_err_take(err, errn);
	}
	return ps;
}

static int vp_start(ps_decoder_t *ps, char *err, size_t errn) {
	vp_err[0] = '\0';
	int rv = ps_start_utt(ps);
	if (rv < 0) {
		vp_err_take(err, errn);
	}
	return rv;
}

static int vp_process(ps_decoder_t *ps, const int16 *pcm, size_t n, char *err, size_t errn) {
	vp_err[0] = '\0';
	int rv = ps_process_raw(ps, pcm, n, 0, 0);
	if (rv < 0) {
		vp_err_take(err, errn);
	}
	return rv;
}

static int vp_end(ps_decoder_t *ps, char *err, size_t errn) {
	vp_err[0] = '\0';
	int rv = ps_end_utt(ps);
	if (rv < 0) {
		vp_err_take(err, errn);
	}
	return rv;
}

// vp_hyp_t is returned by value: an out-parameter would make the Go
// caller's variable escape to the heap on every frame.
typedef struct {
	const char *text; // owned by the decoder, valid until its next call
	size_t len;
} vp_hyp_t;

// vp_hyp returns the current hypothesis, "" when there is none.
static vp_hyp_t vp_hyp(ps_decoder_t *ps) {
	int32 score;
	vp_hyp_t h = {"", 0};
	const char *t = ps_get_hyp(ps, &score);
	if (t != NULL) {
		h.text = t;
		h.len = strlen(t);
	}
	return h;
}

// vp_nbest walks the n-best list of the utterance that just ended (the A*
// search over its word lattice) and copies up to n distinct hypotheses
// into buf, each NUL-terminated at offs[i], with their path scores in
// natural log units in scores[i]. It pops at most maxpaths complete paths
// (A* yields one word string once per segmentation) and frees the search
// before returning, so no C memory outlives the call. It returns how many
// it copied, or -1 when the decoder has no lattice.
static int vp_nbest(ps_decoder_t *ps, int n, int maxpaths, char *buf, size_t bufn,
		int32 *offs, double *scores, char *err, size_t errn) {
	vp_err[0] = '\0';
	ps_nbest_t *nb = ps_nbest(ps);
	if (nb == NULL) {
		vp_err_take(err, errn);
		return -1;
	}
	logmath_t *lmath = ps_get_logmath(ps);
	int count = 0;
	size_t used = 0;
	for (int popped = 0; nb != NULL && count < n && popped < maxpaths; popped++) {
		int32 score = 0;
		const char *t = ps_nbest_hyp(nb, &score);
		if (t == NULL) {
			t = "";
		}
		int dup = 0;
		for (int i = 0; i < count && !dup; i++) {
			dup = strcmp(buf + offs[i], t) == 0;
		}
		size_t len = strlen(t);
		if (!dup) {
			if (used + len + 1 > bufn) {
				break;
			}
			memcpy(buf + used, t, len + 1);
			offs[count] = (int32)used;
			scores[count] = logmath_log_to_ln(lmath, score);
			used += len + 1;
			count++;
		}
		nb = ps_nbest_next(nb); // frees the search when it is exhausted
	}
	if (nb != NULL) {
		ps_nbest_free(nb);
	}
	return count;
}

// vp_cmn_len is the length of the decoder's cepstral vector (13 for en-us).
static int vp_cmn_len(ps_decoder_t *ps) {
	feat_t *f = ps_get_feat(ps);
	if (f == NULL || f->cmn_struct == NULL) {
		return 0;
	}
	return f->cmn_struct->veclen;
}

// vp_cmn_get copies the running cepstral mean into dst (n floats).
static void vp_cmn_get(ps_decoder_t *ps, float *dst, int n) {
	cmn_t *c = ps_get_feat(ps)->cmn_struct;
	int k = n < c->veclen ? n : c->veclen;
	for (int i = 0; i < k; i++) {
		dst[i] = c->cmn_mean[i];
	}
}

// vp_cmn_set replaces the running mean (and its history) with vec.
static void vp_cmn_set(ps_decoder_t *ps, const float *vec) {
	cmn_live_set(ps_get_feat(ps)->cmn_struct, vec);
}

// vp_cmn_weight makes the current mean count as n frames of history
// (cmn_live_set gives it CMN_WIN, 500): the sum becomes mean * n.
static void vp_cmn_weight(ps_decoder_t *ps, int n) {
	cmn_t *c = ps_get_feat(ps)->cmn_struct;
	for (int i = 0; i < c->veclen; i++) {
		c->sum[i] = c->cmn_mean[i] * n;
	}
	c->nframe = n;
}

// vp_cmn_refresh sets the mean that normalises the next frames to the
// running sum over its frames (what cmn_live does only past CMN_WIN_HWM
// frames and at the end of an utterance).
static void vp_cmn_refresh(ps_decoder_t *ps) {
	cmn_t *c = ps_get_feat(ps)->cmn_struct;
	if (c->nframe <= 0) {
		return;
	}
	for (int i = 0; i < c->veclen; i++) {
		c->cmn_mean[i] = c->sum[i] / c->nframe;
	}
}
*/
import "C"

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

var installLog sync.Once

// errBufSize matches vp_err in the C preamble.
const errBufSize = 256

// Decoder is one pocketsphinx decoder (ps_decoder_t). It is not safe for
// concurrent use: exactly one goroutine may call its methods at a time (see
// the package comment).
type Decoder struct {
	ps      *C.ps_decoder_t
	errBuf  *C.char // C-allocated, errBufSize bytes: the reason for a failed call
	cleanup runtime.Cleanup
}

// cHandles is what the cleanup backstop frees; it must not point at the
// Decoder itself or the Decoder would never become unreachable.
type cHandles struct {
	ps     *C.ps_decoder_t
	errBuf *C.char
}

// NewDecoder parses flag/value pairs ("-hmm", dir, "-lm", file, ...) with
// pocketsphinx's own option table and loads the models. Unknown flags, an odd
// number of arguments and -logfn are rejected with ErrConfig; load failures
// return ErrInit with pocketsphinx's reason.
func NewDecoder(args []string) (*Decoder, error) {
	if len(args)%2 != 0 {
		return nil, fmt.Errorf("%w: odd number of arguments (%d); want flag/value pairs", ErrConfig, len(args))
	}
	for i := 0; i < len(args); i += 2 {
		if args[i] == "-logfn" {
			return nil, fmt.Errorf("%w: -logfn would replace the process-wide log callback", ErrConfig)
		}
	}
	installLog.Do(func() { C.vp_install_log() })

	argv := (**C.char)(C.malloc(C.size_t(len(args)+1) * C.size_t(unsafe.Sizeof((*C.char)(nil)))))
	defer C.free(unsafe.Pointer(argv))
	cargs := unsafe.Slice(argv, len(args)+1)
	for i, a := range args {
		cargs[i] = C.CString(a)
	}
	cargs[len(args)] = nil
	defer func() {
		for i := range args {
			C.free(unsafe.Pointer(cargs[i]))
		}
	}()

	errBuf := (*C.char)(C.calloc(errBufSize, 1))
	var stage C.int
	ps := C.vp_init(C.int(len(args)), argv, &stage, errBuf, errBufSize)
	if ps == nil {
		reason := takeErr(errBuf)
		C.free(unsafe.Pointer(errBuf))
		if stage == 1 {
			return nil, fmt.Errorf("%w: %s", ErrConfig, orDefault(reason, "pocketsphinx rejected the flags "+strings.Join(args, " ")))
		}
		return nil, fmt.Errorf("%w: %s", ErrInit, orDefault(reason, "ps_init returned no decoder"))
	}
	d := &Decoder{ps: ps, errBuf: errBuf}
	d.cleanup = runtime.AddCleanup(d, func(h cHandles) {
		C.ps_free(h.ps)
		C.free(unsafe.Pointer(h.errBuf))
	}, cHandles{ps: ps, errBuf: errBuf})
	return d, nil
}

// StartUtt begins an utterance. It fails if one is already in progress.
func (d *Decoder) StartUtt() error {
	if d.ps == nil {
		return ErrClosed
	}
	if C.vp_start(d.ps, d.errBuf, errBufSize) < 0 {
		return fmt.Errorf("%w: start utterance: %s", ErrDecode, orDefault(takeErr(d.errBuf), "ps_start_utt failed"))
	}
	return nil
}

// ProcessRaw feeds mono 16-bit PCM at the decoder's -samprate. C reads pcm
// only during the call and keeps no pointer to it.
func (d *Decoder) ProcessRaw(pcm []int16) error {
	if d.ps == nil {
		return ErrClosed
	}
	if len(pcm) == 0 {
		return nil
	}
	if C.vp_process(d.ps, (*C.int16)(unsafe.Pointer(&pcm[0])), C.size_t(len(pcm)), d.errBuf, errBufSize) < 0 {
		return fmt.Errorf("%w: process audio: %s", ErrDecode, orDefault(takeErr(d.errBuf), "ps_process_raw failed"))
	}
	return nil
}

// Hyp returns the current best hypothesis: a partial one during an
// utterance, the final one after EndUtt. "" when there is none or after Close.
func (d *Decoder) Hyp() string {
	if d.ps == nil {
		return ""
	}
	h := C.vp_hyp(d.ps)
	return C.GoStringN(h.text, C.int(h.len))
}

// AppendHyp appends the current hypothesis to dst and returns the extended
// slice; it allocates only when dst is too short. It is the per-frame form of
// Hyp: callers compare the bytes with the previous hypothesis and make a
// string only when the text changed.
func (d *Decoder) AppendHyp(dst []byte) []byte {
	if d.ps == nil {
		return dst
	}
	h := C.vp_hyp(d.ps)
	if h.len == 0 {
		return dst
	}
	return append(dst, unsafe.Slice((*byte)(unsafe.Pointer(h.text)), int(h.len))...)
}

// InSpeech reports pocketsphinx's voice-activity state for the audio fed so
// far (ps_get_in_speech).
func (d *Decoder) InSpeech() bool {
	if d.ps == nil {
		return false
	}
	return C.ps_get_in_speech(d.ps) != 0
}

// EndUtt ends the utterance; with the default 3-pass search this runs the
// fwdflat and bestpath passes over the whole utterance before returning.
func (d *Decoder) EndUtt() error {
	if d.ps == nil {
		return ErrClosed
	}
	if C.vp_end(d.ps, d.errBuf, errBufSize) < 0 {
		return fmt.Errorf("%w: end utterance: %s", ErrDecode, orDefault(takeErr(d.errBuf), "ps_end_utt failed"))
	}
	return nil
}

// nbestTextBytes bounds the text NBest copies out of one list.
const nbestTextBytes = 16 << 10

// NBest returns up to n distinct hypotheses of the utterance that just
// ended, best first, from pocketsphinx's A* search over its word lattice
// (ps_nbest). The search yields the same words once per segmentation;
// maxPaths bounds how many paths it takes (its cost), so fewer than n may
// come back. Call it after EndUtt and before the next StartUtt. It holds no
// C memory after it returns.
func (d *Decoder) NBest(n, maxPaths int) ([]NBestHyp, error) {
	if d.ps == nil {
		return nil, ErrClosed
	}
	if n <= 0 || maxPaths <= 0 {
		return nil, nil
	}
	buf := make([]byte, nbestTextBytes)
	offs := make([]int32, n)
	scores := make([]float64, n)
	k := C.vp_nbest(d.ps, C.int(n), C.int(maxPaths), (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)),
		(*C.int32)(unsafe.Pointer(&offs[0])), (*C.double)(unsafe.Pointer(&scores[0])), d.errBuf, errBufSize)
	if k < 0 {
		return nil, fmt.Errorf("%w: n-best: %s", ErrDecode, orDefault(takeErr(d.errBuf), "no lattice for the utterance"))
	}
	out := make([]NBestHyp, int(k))
	for i := range out {
		t := buf[offs[i]:]
		if j := bytes.IndexByte(t, 0); j >= 0 {
			t = t[:j]
		}
		out[i] = NBestHyp{Text: string(t), Score: scores[i]}
	}
	return out, nil
}

// CMNLen returns the length of the decoder's cepstral mean vector (13 for
// the en-us model), 0 after Close.
func (d *Decoder) CMNLen() int {
	if d.ps == nil {
		return 0
	}
	return int(C.vp_cmn_len(d.ps))
}

// CMN appends the decoder's running cepstral mean (the live CMN estimate
// pocketsphinx subtracts from every frame) to dst.
func (d *Decoder) CMN(dst []float32) []float32 {
	n := d.CMNLen()
	if n == 0 {
		return dst
	}
	start := len(dst)
	dst = append(dst, make([]float32, n)...)
	C.vp_cmn_get(d.ps, (*C.float)(unsafe.Pointer(&dst[start])), C.int(n))
	return dst
}

// SetCMN replaces the running cepstral mean with vec, which must have
// CMNLen values. Call it between utterances: the next utterance is
// normalised from vec on. The estimate keeps adapting from there.
func (d *Decoder) SetCMN(vec []float32) error {
	if d.ps == nil {
		return ErrClosed
	}
	if n := d.CMNLen(); len(vec) != n {
		return fmt.Errorf("%w: CMN vector has %d values, the model's has %d", ErrConfig, len(vec), n)
	}
	C.vp_cmn_set(d.ps, (*C.float)(unsafe.Pointer(&vec[0])))
	return nil
}

// SetCMNWeight makes the running mean count as frames frames of history
// (10 ms each): how far the speech that follows moves it. SetCMN gives it
// pocketsphinx's 500. Call it between utterances, after SetCMN.
func (d *Decoder) SetCMNWeight(frames int) error {
	if d.ps == nil {
		return ErrClosed
	}
	if frames <= 0 {
		return fmt.Errorf("%w: CMN weight %d frames: want > 0", ErrConfig, frames)
	}
	if d.CMNLen() == 0 {
		return nil
	}
	C.vp_cmn_weight(d.ps, C.int(frames))
	return nil
}

// RefreshCMN makes the running estimate (the starting mean's weight plus
// every frame decoded since) the mean that normalises the frames decoded
// next. pocketsphinx itself does that only every 3 s of speech and at the
// end of an utterance, so a short utterance is normalised entirely by the
// mean it started with.
func (d *Decoder) RefreshCMN() {
	if d.ps == nil || d.CMNLen() == 0 {
		return
	}
	C.vp_cmn_refresh(d.ps)
}

// Close frees the decoder. It is idempotent; other methods return ErrClosed
// (or "" / false) afterwards.
func (d *Decoder) Close() error {
	if d.ps == nil {
		return nil
	}
	d.cleanup.Stop()
	C.ps_free(d.ps)
	C.free(unsafe.Pointer(d.errBuf))
	d.ps, d.errBuf = nil, nil
	return nil
}

// takeErr copies the C error message out and clears the buffer.
func takeErr(buf *C.char) string {
	msg := strings.TrimSpace(C.GoString(buf))
	*buf = 0
	// sphinxbase prefixes `ERROR: "file.c", line N: `; keep only the reason.
	if strings.HasPrefix(msg, "ERROR: ") || strings.HasPrefix(msg, "FATAL: ") {
		if k := strings.Index(msg, "\", line "); k >= 0 {
			if m := strings.Index(msg[k:], ": "); m >= 0 {
				msg = msg[k+m+2:]
			}
		}
	}
	// House style is lower-case messages; pocketsphinx capitalises its own.
	if len(msg) > 1 && msg[0] >= 'A' && msg[0] <= 'Z' && (msg[1] < 'A' || msg[1] > 'Z') {
		msg = string(msg[0]+'a'-'A') + msg[1:]
	}
	return msg
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
