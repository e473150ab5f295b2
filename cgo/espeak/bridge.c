//go:build cgo

#include <string.h>
#include "bridge.h"
#include "_cgo_export.h"

/* The handle of the synthesis in progress. espeak-ng is a process-wide
 * singleton; the Go side serialises every call with one mutex, which also
 * guards this variable. */
static uintptr_t current;

/* synth_chunk is espeak's callback: wav == NULL marks the end of the text.
 * Events arrive with the audio they fall in, terminated by LIST_TERMINATED. */
static int synth_chunk(short *wav, int n, espeak_EVENT *events)
{
	int nev = 0;

	while (events && events[nev].type != espeakEVENT_LIST_TERMINATED)
		nev++;
	return goEspeakChunk(current, wav, wav ? n : 0, events, nev, wav == NULL);
}

int vp_espeak_init(void)
{
	int rate = espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 0, NULL,
	                             espeakINITIALIZE_DONT_EXIT);
	if (rate > 0)
		espeak_SetSynthCallback(synth_chunk);
	return rate;
}

int vp_espeak_synth(uintptr_t handle, const char *text)
{
	int rc;

	current = handle;
	/* No espeakENDPAUSE: it appends ~0.3 s of silence to every text. */
	rc = espeak_Synth(text, strlen(text) + 1, 0, POS_CHARACTER, 0,
	                  espeakCHARS_UTF8, NULL, NULL);
	current = 0;
	return rc;
}
