/* g722dec: decodes a raw 64 kbit/s G.722 stream (stdin) to 16 kHz mono
 * s16le PCM (stdout) with libspandsp. `make asr-sets` builds and uses it for
 * the wideband copy of the Asterisk prompts (asterisk-core-sounds-en-g722).
 * It is a build tool, not part of the server; Go tooling ignores this
 * folder (no Go files). */
#include <stdint.h>
#include <stdio.h>
#include <spandsp.h>

int main(void) {
	g722_decode_state_t *s = g722_decode_init(NULL, 64000, 0);
	if (s == NULL) {
		fprintf(stderr, "g722dec: g722_decode_init failed\n");
		return 1;
	}
	uint8_t in[4096];
	int16_t out[2 * 4096];
	size_t n;
	while ((n = fread(in, 1, sizeof in, stdin)) > 0) {
		int m = g722_decode(s, out, in, (int)n);
		if (fwrite(out, sizeof out[0], (size_t)m, stdout) != (size_t)m) {
			fprintf(stderr, "g722dec: write failed\n");
			return 1;
		}
	}
	g722_decode_release(s);
	return ferror(stdin) ? 1 : 0;
}
