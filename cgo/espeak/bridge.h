//go:build cgo

#ifndef VOXPIPE_ESPEAK_BRIDGE_H
#define VOXPIPE_ESPEAK_BRIDGE_H

#include <stdint.h>
#include <espeak-ng/speak_lib.h>

/* vp_espeak_init initialises espeak-ng in synchronous mode without exiting
 * on failure. Returns the sample rate, or -1. */
int vp_espeak_init(void);

/* vp_espeak_synth speaks text (UTF-8) through the synth callback, tagging
 * every chunk with handle. Returns espeak's status. */
int vp_espeak_synth(uintptr_t handle, const char *text);

#endif
