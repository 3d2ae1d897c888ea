"""The models the SGLang run serves, made on the spot (nothing is downloaded):

    python benchmarks/sglang-gpu/make_models.py DIR

- DIR/attentive, DIR/bang: small Llamas of tests/support/verify_server.py (its `gpu` size): answers that read
  the prompt (the capital of France, a count: what smoke asks), and the all-`!` answers of the seed
  deployment's failure;
- DIR/qwen3.5-moe: a tiny Qwen3_5MoeForConditionalGeneration (the profile's architecture): its config
  written with SGLang's own config class (sglang/srt/configs/qwen3_5.py, so SGLang reads back what it
  writes), 4 decoder layers (3 Gated DeltaNet + 1 gated attention, as the real model alternates them),
  8 experts, a tiny vision tower, the BPE tokenizer of verify_server with the Qwen-VL special tokens, and
  the processor files of a Qwen3-VL checkpoint. No weights: it is served with --load-format dummy.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "tests" / "support"))

import verify_server  # noqa: E402 (the tests' model maker)

VL_TOKENS = ["<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def make_qwen(directory: Path) -> Path:
    from sglang.srt.configs.qwen3_5 import Qwen3_5MoeConfig
    from transformers import PreTrainedTokenizerFast

    tok = verify_server._train_tokenizer()
    tok.add_special_tokens(VL_TOKENS)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=verify_server.EOS, pad_token=verify_server.EOS,
                                   additional_special_tokens=VL_TOKENS)
    fast.chat_template = CHAT_TEMPLATE
    ids = {t: fast.convert_tokens_to_ids(t) for t in VL_TOKENS}
    vocab = 512  # above every token id
    eos = fast.convert_tokens_to_ids(verify_server.EOS)
    text = {
        "vocab_size": vocab, "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "max_position_embeddings": 4096,
        "linear_conv_kernel_dim": 4, "linear_key_head_dim": 32, "linear_value_head_dim": 32,
        "linear_num_key_heads": 4, "linear_num_value_heads": 8,
        # SGLang 0.5.9 reads the layer kinds from full_attention_interval (srt/configs/qwen3_next.py
        # layers_block_type); without it the model's constructor stops (the first run: AttributeError).
        "full_attention_interval": 4,
        "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
        "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 128,
        "shared_expert_intermediate_size": 128, "eos_token_id": eos, "pad_token_id": eos,
        "tie_word_embeddings": False,
        # SGLang takes the dtype from the text config (model_config.py _get_and_verify_dtype(hf_text_config)):
        # without it, "auto" gives float16 against bfloat16 conv states, and causal_conv1d_fwd stops
        # (the fourth run: "Expected conv_states_.scalar_type() == input_type").
        "dtype": "bfloat16",
        # The real checkpoint's RoPE block, scaled down: SGLang's attention layer hands rope_parameters to
        # get_rope, which stops on a dict without rope_type ("Unknown RoPE scaling type", the second run);
        # mrope_section sums to rotary_dim / 2 = head_dim * 0.25 / 2 = 8 (the real one: 256 * 0.25 / 2 = 32).
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                            "mrope_interleaved": True, "mrope_section": [3, 3, 2]},
    }
    vision = {"depth": 2, "hidden_size": 64, "intermediate_size": 128, "num_heads": 2, "out_hidden_size": 256,
              "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2, "deepstack_visual_indexes": []}
    config = Qwen3_5MoeConfig(
        text_config=text, vision_config=vision, image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"], vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"], architectures=["Qwen3_5MoeForConditionalGeneration"],
        torch_dtype="bfloat16", eos_token_id=eos,
    )
    directory.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(directory)
    fast.save_pretrained(directory)
    image = {"image_processor_type": "Qwen2VLImageProcessorFast", "processor_class": "Qwen3VLProcessor",
             "patch_size": 16, "temporal_patch_size": 2, "merge_size": 2, "min_pixels": 65536, "max_pixels": 1048576,
             "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "do_resize": True}
    (directory / "preprocessor_config.json").write_text(json.dumps(image, indent=2) + "\n")
    video = {**image, "video_processor_type": "Qwen3VLVideoProcessor", "fps": 2}
    video.pop("image_processor_type")
    (directory / "video_preprocessor_config.json").write_text(json.dumps(video, indent=2) + "\n")
    (directory / "chat_template.json").write_text(json.dumps({"chat_template": CHAT_TEMPLATE}) + "\n")
    return directory


def main(argv: list[str]) -> int:
    root = Path(argv[0] if argv else "/tmp/sglang-gpu-models")
    made = verify_server.make_models(root, "gpu", names=("attentive", "bang"))
    made["qwen3.5-moe"] = make_qwen(root / "qwen3.5-moe")
    for name, path in made.items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
