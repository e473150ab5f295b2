// Package models embeds the small models the server needs wherever it runs
// (the GGUF language models beside this file are read from disk instead).
package models

import _ "embed" // for go:embed

// SileroVAD is Silero VAD v6.2's 16 kHz ONNX graph, unchanged (MIT licence
// in silero-vad-LICENSE; source and commit in README.md). pipeline/audio/silero
// reads its weights.
//
//go:embed silero_vad_16k_op15.onnx
var SileroVAD []byte
