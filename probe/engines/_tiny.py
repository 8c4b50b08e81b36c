"""A tiny, randomly initialised Qwen3-style model built on the fly, for tests and benchmarks.

The tokenizer is trained here with the `tokenizers` library on a small
generated corpus, with Qwen's pre-tokenization rule (so punctuation fuses
with the newlines after it, giving compound boundary forms such as
``".\\n\\n"``) and the special tokens of every family in `artifacts/`
(ChatML, `<think>`/`</think>`, the harmony markers, DeepSeek's turn
markers), so every family compiles against it. The model is a 2-layer
Qwen3 with head dimension 64 (vLLM's CPU attention needs a supported head
size; 64 works). Everything is deterministic given `seed`.
"""

import json
from pathlib import Path

SPECIAL_TOKENS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>",
    "<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|return|>", "<|call|>",
    "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>",
)

# Qwen2/3's pre-tokenizer split: `?[^\s\p{L}\p{N}]+[\r\n]*` keeps ".\n\n" together.
_QWEN_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

_WORDS = ("the", "we", "so", "then", "add", "sum", "check", "answer", "is", "number",
          "first", "next", "wait", "let", "me", "compute", "carry", "digit", "result",
          "therefore", "final", "step", "again", "verify", "total", "boxed", "minus", "plus")


def _corpus(seed: int, lines: int = 3000) -> list[str]:
    import random
    rng = random.Random(seed)
    out = []
    for _ in range(lines):
        para = []
        for _ in range(rng.randint(1, 4)):
            words = [rng.choice(_WORDS) for _ in range(rng.randint(3, 9))]
            nums = f"{rng.randint(0, 999)} + {rng.randint(0, 999)} = {rng.randint(0, 1998)}"
            para.append(" ".join(words).capitalize() + " " + nums + rng.choice([".", ":", "!", "?", ")"]))
        sep = rng.choice(["\n\n", ".\n\n", "\n", " ", "\n\n\n", ":\n\n", " \n\n"])
        out.append(" ".join(para) + sep + "\\boxed{" + str(rng.randint(0, 99)) + "}")
    return out


def build_tokenizer(seed: int = 0, vocab_size: int = 640):
    """A trained byte-level BPE `PreTrainedTokenizerFast` with every family's special tokens."""
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(_QWEN_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=2, show_progress=False,
        special_tokens=[AddedToken(s, special=True, normalized=False) for s in SPECIAL_TOKENS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_corpus(seed), trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", bos_token=None, unk_token=None)


def build_tiny_model(out_dir: str | Path, seed: int = 0, *, layers: int = 2, hidden: int = 128) -> Path:
    """Write a tiny Qwen3 model + tokenizer to `out_dir` (reused when already built with these settings).

    Returns the directory, loadable by both engines (`safetensors`, float32).
    """
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    out = Path(out_dir)
    stamp = {"builder": "otbench.tiny/1", "seed": seed, "layers": layers, "hidden": hidden}
    marker = out / "otbench_tiny.json"
    if marker.is_file() and json.loads(marker.read_text()) == stamp:
        return out
    out.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer(seed)
    tok.save_pretrained(out)
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    cfg = Qwen3Config(
        vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden,
        num_hidden_layers=layers, num_attention_heads=hidden // 64, num_key_value_heads=1,
        head_dim=64, max_position_embeddings=4096, tie_word_embeddings=True,
        bos_token_id=None, eos_token_id=eos, pad_token_id=tok.pad_token_id,
        torch_dtype="float32",
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(cfg)
    # Larger-than-default weights make the random model's next-token
    # distributions peaked (like a trained model's), so greedy decoding has no
    # near-ties and sampled trajectories hit stop tokens at varied lengths.
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.35)
    model.generation_config.eos_token_id = eos
    model.save_pretrained(out, safe_serialization=True)
    marker.write_text(json.dumps(stamp))
    return out
