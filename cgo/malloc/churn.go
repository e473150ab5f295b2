//go:build cgo && linux

package malloc

/*
#include <stdlib.h>
#include <string.h>

// vp_churn allocates n blocks of size bytes (touched), then one small block
// above them, frees the n blocks and returns the small one: the freed
// memory stays in the arena below a live block, as a C library's does.
static void *vp_churn(int n, size_t size) {
	void **p = malloc(n * sizeof(void *));
	for (int i = 0; i < n; i++) {
		p[i] = malloc(size);
		memset(p[i], 1, size);
	}
	void *keep = malloc(16);
	for (int i = 0; i < n; i++) free(p[i]);
	free(p);
	return keep;
}
*/
import "C"

import "unsafe"

// churn leaves n*size bytes freed but held in the arena (tests); the
// returned pointer must be given to release.
func churn(n, size int) unsafe.Pointer { return C.vp_churn(C.int(n), C.size_t(size)) }

func release(p unsafe.Pointer) { C.free(p) }
