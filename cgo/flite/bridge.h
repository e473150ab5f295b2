//go:build cgo

#ifndef VOXPIPE_FLITE_BRIDGE_H
#define VOXPIPE_FLITE_BRIDGE_H

#include <stdint.h>
#include <flite/flite.h>

/* The CMU voices linked into the binary (flite ships no header for them). */
cst_voice *register_cmu_us_slt(const char *voxdir);
cst_voice *register_cmu_us_rms(const char *voxdir);
cst_voice *register_cmu_us_awb(const char *voxdir);
cst_voice *register_cmu_us_kal16(const char *voxdir);

/* One input token that produced at least one word: where it sits in the
 * text and when its last word ends (seconds from the utterance start, -1 if
 * flite gave no segment time). name points into the utterance and is valid
 * only during the callback. */
typedef struct {
	float end;
	int file_pos;
	int pre_len;
	int name_len;
	const char *name;
} vp_flite_token;

typedef struct {
	cst_voice *voice;
	cst_audio_streaming_info *asi;
	float default_stretch;
	float default_f0;
} vp_flite_voice;

/* vp_flite_register registers one named voice and attaches the streaming
 * callback to it. Returns 0, or -1 for an unknown name. */
int vp_flite_register(const char *name, vp_flite_voice *out, int chunk_samples);

/* vp_flite_synth speaks text through the streaming callback, tagging every
 * chunk with handle. Returns 0, or -1 when flite reported an internal error. */
int vp_flite_synth(vp_flite_voice *v, uintptr_t handle, const char *text,
                   float stretch, float f0);

#endif
