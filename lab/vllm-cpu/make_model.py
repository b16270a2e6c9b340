#!/usr/bin/python3
"""Make the lab's small real models: a Llama target and a smaller Llama draft sharing its tokenizer.

Runs inside the real-engine image (it has torch, transformers and tokenizers), writing with
``save_pretrained`` what a Hugging Face repo holds::

    docker run --rm --entrypoint python3 -v OUT:/out -v THIS:/make_model.py:ro \\
        specdec-lab/vllm-cpu:0.32.0 /make_model.py /out

Deterministic: the text is the image's own files (the Python standard library's source, and the
licence texts every Debian system carries), the tokenizer is trained on it, and both models are
trained from a fixed seed for a fixed number of steps on one thread. The training is short: the
output is repetitive and not always sensible, but it is text, so speculative decoding has something
real to accept or reject (n-gram drafts are accepted often on such output, a random draft never).
"""

import glob
import json
import os
import sys

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

SEED = 20261124
VOCAB = 4096
SEQ = 128
BATCH = 16
TARGET = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4,
              num_key_value_heads=4, steps=60, lr=3e-3)
DRAFT = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=2,
             num_key_value_heads=2, steps=60, lr=3e-3)
CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")


def corpus():
    """The training text: source files and licence texts, in a fixed order."""
    paths = sorted(glob.glob("/usr/lib/python3.11/[a-m]*.py"))[:60]
    paths += sorted(p for p in glob.glob("/usr/share/common-licenses/*") if os.path.isfile(p))
    texts = []
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as handle:
            texts.append(handle.read())
    return texts


def train_tokenizer(texts):
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<s>", "</s>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                   model_max_length=1024, chat_template=CHAT_TEMPLATE)


def train_model(ids, tokenizer, shape, out):
    torch.manual_seed(SEED)
    config = LlamaConfig(vocab_size=VOCAB, max_position_embeddings=1024, rms_norm_eps=1e-5,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         tie_word_embeddings=False, torch_dtype="float32",
                         **{k: v for k, v in shape.items() if k not in ("steps", "lr")})
    model = LlamaForCausalLM(config)
    optimiser = torch.optim.AdamW(model.parameters(), lr=shape["lr"])
    generator = torch.Generator().manual_seed(SEED)
    model.train()
    for step in range(shape["steps"]):
        starts = torch.randint(0, ids.numel() - SEQ - 1, (BATCH,), generator=generator)
        batch = torch.stack([ids[s:s + SEQ] for s in starts.tolist()])
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        optimiser.step()
        optimiser.zero_grad()
        if step % 10 == 0 or step == shape["steps"] - 1:
            print("%s step %d loss %.3f" % (os.path.basename(out), step, loss.item()), flush=True)
    model.eval()
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    with open(os.path.join(out, "README.md"), "w") as handle:
        handle.write("# %s\n\nA small Llama model made by the lab (lab/vllm-cpu/make_model.py): %d layers, "
                     "hidden size %d, %d training steps on local text.\n"
                     % (os.path.basename(out), shape["num_hidden_layers"], shape["hidden_size"], shape["steps"]))


def main(argv):
    out = argv[1] if len(argv) > 1 else "/out"
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    texts = corpus()
    tokenizer = train_tokenizer(texts)
    ids = torch.tensor(tokenizer("\n\n".join(texts))["input_ids"], dtype=torch.long)
    print("corpus: %d files, %d tokens" % (len(texts), ids.numel()), flush=True)
    train_model(ids, tokenizer, TARGET, os.path.join(out, "tiny-llama"))
    train_model(ids, tokenizer, DRAFT, os.path.join(out, "tiny-llama-draft"))
    with open(os.path.join(out, "made.json"), "w") as handle:
        json.dump({"target": TARGET, "draft": DRAFT, "seed": SEED, "vocab": VOCAB, "tokens": ids.numel()},
                  handle, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
