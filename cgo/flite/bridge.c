//go:build cgo

#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include "bridge.h"
#include "_cgo_export.h"

/* Token scratch space, reused across utterances. Only touched inside
 * vp_flite_synth, which the Go side serialises with its process-wide mutex. */
static vp_flite_token *tokens;
static int tokens_cap;

static int tokens_reserve(int n)
{
	vp_flite_token *grown;
	int cap;

	if (n <= tokens_cap)
		return 0;
	cap = tokens_cap ? tokens_cap * 2 : 64;
	while (cap < n)
		cap *= 2;
	grown = realloc(tokens, sizeof(*tokens) * cap);
	if (grown == NULL)
		return -1;
	tokens = grown;
	tokens_cap = cap;
	return 0;
}

static int feat_len(const cst_item *it, const char *name)
{
	if (!item_feat_present(it, name))
		return 0;
	return (int)strlen(item_feat_string(it, name));
}

/* collect_tokens walks the utterance's words, grouping consecutive words of
 * one token ("1234" gives "one thousand two hundred ..."): a token counts as
 * spoken when its last word ends. Returns the token count, -1 on no memory. */
static int collect_tokens(const cst_utterance *utt)
{
	const cst_item *word, *tok, *seg, *prev = NULL;
	int n = 0;
	float end;

	if (utt == NULL || !utt_relation_present((cst_utterance *)utt, "Word"))
		return 0;
	for (word = relation_head(utt_relation(utt, "Word")); word; word = item_next(word)) {
		seg = path_to_item(word, "R:SylStructure.daughtern.daughtern.R:Segment");
		end = (seg && item_feat_present(seg, "end")) ? item_feat_float(seg, "end") : -1;
		tok = path_to_item(word, "R:Token.parent");
		if (tok == NULL || tok == prev) {
			if (n > 0 && end >= 0)
				tokens[n - 1].end = end;
			continue;
		}
		if (tokens_reserve(n + 1) != 0)
			return -1;
		prev = tok;
		tokens[n].end = end;
		tokens[n].file_pos = item_feat_present(tok, "file_pos") ? item_feat_int(tok, "file_pos") : -1;
		tokens[n].pre_len = feat_len(tok, "prepunctuation");
		tokens[n].name = item_feat_present(tok, "name") ? item_feat_string(tok, "name") : "";
		tokens[n].name_len = (int)strlen(tokens[n].name);
		n++;
	}
	return n;
}

/* stream_chunk is flite's audio callback. Each utterance restarts its wave at
 * start == 0, which is when the word timings of that utterance are handed
 * over. The handle is an integer (a cgo.Handle), never a Go pointer. */
static int stream_chunk(const cst_wave *w, int start, int size, int last,
                        cst_audio_streaming_info *asi)
{
	int ntok = 0;

	if (start == 0)
		ntok = collect_tokens(asi->utt);
	return goFliteChunk((uintptr_t)asi->userdata, w->samples + start, size, last,
	                    start == 0, tokens, ntok);
}

int vp_flite_register(const char *name, vp_flite_voice *out, int chunk_samples)
{
	cst_voice *v;

	if (strcmp(name, "slt") == 0)
		v = register_cmu_us_slt(NULL);
	else if (strcmp(name, "rms") == 0)
		v = register_cmu_us_rms(NULL);
	else if (strcmp(name, "awb") == 0)
		v = register_cmu_us_awb(NULL);
	else if (strcmp(name, "kal16") == 0)
		v = register_cmu_us_kal16(NULL);
	else
		return -1;
	if (v == NULL)
		return -1;
	out->voice = v;
	out->default_stretch = get_param_float(v->features, "duration_stretch", 1.0);
	out->default_f0 = get_param_float(v->features, "int_f0_target_mean", 0.0);
	out->asi = new_audio_streaming_info();
	out->asi->min_buffsize = chunk_samples;
	out->asi->asc = stream_chunk;
	out->asi->userdata = NULL;
	/* The voice owns the streaming info from here on. */
	feat_set(v->features, "streaming_info", audio_streaming_info_val(out->asi));
	return 0;
}

int vp_flite_synth(vp_flite_voice *v, uintptr_t handle, const char *text,
                   float stretch, float f0)
{
	jmp_buf env;
	jmp_buf *volatile saved = cst_errjmp;
	cst_tokenstream *ts;
	const cst_features *f = v->voice->features;

	feat_set_float(v->voice->features, "duration_stretch", stretch);
	/* The clustergen voices have no default target: removing it restores
	 * their own F0. */
	if (f0 > 0)
		feat_set_float(v->voice->features, "int_f0_target_mean", f0);
	else
		feat_remove(v->voice->features, "int_f0_target_mean");
	v->asi->userdata = (void *)handle;

	ts = ts_open_string(text,
	                    get_param_string(f, "text_whitespace", NULL),
	                    get_param_string(f, "text_singlecharsymbols", NULL),
	                    get_param_string(f, "text_prepunctuation", NULL),
	                    get_param_string(f, "text_postpunctuation", NULL));
	if (ts == NULL) {
		v->asi->userdata = NULL;
		return -1;
	}
	/* flite's cst_error() calls exit() unless cst_errjmp is set. Only C
	 * frames lie between here and any cst_error (the Go callback never
	 * calls back into flite), so the longjmp never crosses Go frames. The
	 * utterance being built is leaked in that case. */
	cst_errjmp = &env;
	if (setjmp(env) != 0) {
		cst_errjmp = saved;
		v->asi->userdata = NULL;
		return -1;
	}
	flite_ts_to_speech(ts, v->voice, "none"); /* closes ts */
	cst_errjmp = saved;
	v->asi->userdata = NULL;
	return 0;
}
