"""A Voxtral audio encoder as onnx-community exports it (transformers.js `audio_encoder`):
input `audio_values` float32 [chunks, 128, 3000] (the processor's log-mel, cut into 30 s
chunks), output `audio_features` [chunks, 375, hidden] (audio tower, 4-frame concatenation
and projector in one graph). Written from the same computation as encoder_ref.py's voxtral()
(its building blocks, batched over chunks), with the weights of a Hugging Face folder, exported
by torch.onnx (opset 17) so onnxruntime-web can run it.

  onnx_encoder.py --model FOLDER --out DIR
      writes DIR/audio_encoder.onnx and variants a loader must handle or refuse:
      audio_encoder_flat.onnx (output [chunks*375, hidden]), bad_input.onnx (input named
      `input_features`), bad_width.onnx (output one value narrower than hidden), and
      external/audio_encoder.onnx with its weights in external/audio_encoder.onnx_data
      (the layout of exports too large for one protobuf).
"""
import argparse
import os

import torch

from encoder_ref import conv, gelu, linear, load_folder, n_layers

torch.set_num_threads(1)


def layer_norm(x, w, b, eps=1e-5):
    """encoder_ref.layer_norm with the width taken from the weight (a traced shape is not static)."""
    return torch.nn.functional.layer_norm(x, (w.shape[0],), w, b, eps)


def layer(h, W, p, heads):
    """encoder_ref.encoder_layer over a batch of chunks: h [B, S, d]."""
    S, d = 1500, h.shape[2]
    hd = d // heads
    r = h
    x = layer_norm(h, W[p + "self_attn_layer_norm.weight"], W[p + "self_attn_layer_norm.bias"])
    q = linear(x, W[p + "self_attn.q_proj.weight"], W[p + "self_attn.q_proj.bias"]) * hd ** -0.5
    k = linear(x, W[p + "self_attn.k_proj.weight"])
    v = linear(x, W[p + "self_attn.v_proj.weight"], W[p + "self_attn.v_proj.bias"])
    q, k, v = (t.reshape(-1, S, heads, hd).transpose(1, 2) for t in (q, k, v))
    a = torch.softmax(q @ k.transpose(2, 3), dim=-1) @ v
    a = a.transpose(1, 2).reshape(-1, S, d)
    h = r + linear(a, W[p + "self_attn.out_proj.weight"], W[p + "self_attn.out_proj.bias"])
    x = layer_norm(h, W[p + "final_layer_norm.weight"], W[p + "final_layer_norm.bias"])
    return h + linear(gelu(linear(x, W[p + "fc1.weight"], W[p + "fc1.bias"])), W[p + "fc2.weight"], W[p + "fc2.bias"])


class VoxtralAudioEncoder(torch.nn.Module):
    def __init__(self, cfg, W, flat=False, narrow=False):
        super().__init__()
        # Registered as parameters so the export stores them as initialisers, as real exports do.
        self.params = torch.nn.ParameterDict({k.replace(".", "__"): torch.nn.Parameter(v, requires_grad=False) for k, v in W.items()})
        self.W = {k: self.params[k.replace(".", "__")] for k in W}
        self.ac, self.flat, self.narrow = cfg["audio_config"], flat, narrow

    def forward(self, audio_values):
        W, ac, pre = self.W, self.ac, "audio_tower."
        x = gelu(conv(audio_values, W, pre + "conv1", 1))
        x = gelu(conv(x, W, pre + "conv2", 2)).transpose(1, 2)  # [B, 1500, d]
        x = x + W[pre + "embed_positions.weight"][:1500]
        for i in range(n_layers(ac)):
            x = layer(x, W, f"{pre}layers.{i}.", ac["num_attention_heads"])
        x = layer_norm(x, W[pre + "layer_norm.weight"], W[pre + "layer_norm.bias"])
        h = x.reshape(-1, 375, ac["intermediate_size"])  # 4 consecutive frames per row
        h = gelu(linear(h, W["multi_modal_projector.linear_1.weight"]))
        y = linear(h, W["multi_modal_projector.linear_2.weight"])
        if self.narrow:
            y = y[:, :, 1:]
        return y.reshape(-1, y.shape[2]) if self.flat else y


def export(model, path, input_name="audio_values"):
    x = torch.zeros(1, 128, 3000)
    torch.onnx.export(model, (x,), path, opset_version=17, input_names=[input_name], output_names=["audio_features"],
                      dynamic_axes={input_name: {0: "chunks"}, "audio_features": {0: "rows"}})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    cfg, W = load_folder(a.model)
    W = {k: v.float() for k, v in W.items() if k.startswith(("audio_tower.", "multi_modal_projector."))}
    os.makedirs(a.out, exist_ok=True)
    with torch.no_grad():
        export(VoxtralAudioEncoder(cfg, W), os.path.join(a.out, "audio_encoder.onnx"))
        export(VoxtralAudioEncoder(cfg, W, flat=True), os.path.join(a.out, "audio_encoder_flat.onnx"))
        export(VoxtralAudioEncoder(cfg, W), os.path.join(a.out, "bad_input.onnx"), input_name="input_features")
        export(VoxtralAudioEncoder(cfg, W, narrow=True), os.path.join(a.out, "bad_width.onnx"))
    import onnx

    os.makedirs(os.path.join(a.out, "external"))
    m = onnx.load(os.path.join(a.out, "audio_encoder.onnx"))
    onnx.save_model(m, os.path.join(a.out, "external", "audio_encoder.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="audio_encoder.onnx_data", size_threshold=0)


if __name__ == "__main__":
    main()
