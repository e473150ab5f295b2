#!/bin/sh
# Makes the reference speech probabilities that silero_test.go compares
# against: real speech from pocketsphinx-testdata, clean, then in pink noise
# at 10 dB SNR, then noise alone, run through the published ONNX graph by
# ONNX Runtime (onnxruntime-node from npm; Debian's python3-onnx 1.12 has
# no reference evaluator).
#
#   sh reference.sh /path/to/silero_vad_16k_op15.onnx   (needs sox, node, npm)
#
# The ONNX file is the one in models/ (the default). Writes input.raw
# (16 kHz s16le) and reference.json here.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
model=${1:-$here/../../../../models/silero_vad_16k_op15.onnx}
data=/usr/share/pocketsphinx/test/data
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
raw="-t raw -r 16000 -e signed -b 16 -c 1"
sox $raw "$data/goforward.raw" "$tmp/speech.wav"
sox -n -r 16000 -b 16 -c 1 "$tmp/silence.wav" trim 0 0.5
# Pink noise peaking at -36 dBFS under speech peaking at -14 dBFS (RMS -31).
len=$(soxi -D "$tmp/speech.wav")
sox -R -n -r 16000 -b 16 -c 1 "$tmp/pink.wav" synth "$len" pinknoise gain -n -36
sox -m "$tmp/speech.wav" "$tmp/pink.wav" "$tmp/noisy.wav"
sox -R -n -r 16000 -b 16 -c 1 "$tmp/pinkonly.wav" synth 1.5 pinknoise gain -n -36
sox "$tmp/speech.wav" "$tmp/silence.wav" "$tmp/noisy.wav" "$tmp/pinkonly.wav" $raw "$here/input.raw"
cd "$tmp"
npm init -y >/dev/null
# The install script fetches optional GPU libraries; the CPU build is in the package.
npm install --ignore-scripts --silent onnxruntime-node@1.30.0
cat >run.js <<'JS'
const fs = require('fs');
const ort = require('onnxruntime-node');
(async () => {
  const [model, input, output] = process.argv.slice(2);
  const b = fs.readFileSync(input);
  const pcm = new Float32Array(b.length / 2);
  for (let i = 0; i < pcm.length; i++) pcm[i] = b.readInt16LE(2 * i) / 32768;
  const s = await ort.InferenceSession.create(model);
  // As the project's ONNX wrapper does: each call gets the previous
  // window's last 64 samples in front, and the LSTM state it returned.
  let state = new ort.Tensor('float32', new Float32Array(256), [2, 1, 128]);
  const sr = new ort.Tensor('int64', BigInt64Array.from([16000n]), []);
  const ctx = new Float32Array(64);
  const probs = [];
  for (let off = 0; off + 512 <= pcm.length; off += 512) {
    const x = new Float32Array(576);
    x.set(ctx, 0);
    x.set(pcm.subarray(off, off + 512), 64);
    const r = await s.run({ input: new ort.Tensor('float32', x, [1, 576]), state, sr });
    probs.push(r.output.data[0]);
    state = r.stateN;
    ctx.set(x.subarray(512, 576));
  }
  fs.writeFileSync(output, JSON.stringify({ model: 'silero_vad_16k_op15.onnx', runtime: 'onnxruntime-node 1.30.0', window: 512, probs }) + '\n');
})();
JS
node run.js "$model" "$here/input.raw" "$here/reference.json"
