//go:build !cgo

package sphinx

// haveCgo: built with CGO_ENABLED=0, every decoder fails with ErrNoCgo.
const haveCgo = false
