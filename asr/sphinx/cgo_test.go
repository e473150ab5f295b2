//go:build cgo

package sphinx

// haveCgo: pocketsphinx is linked in.
const haveCgo = true
