#!/usr/bin/python3
"""A SentencePiece BPE model with byte fallback, trained as Llama 2's was set up
(identity normalization, dummy prefix, extra spaces kept, digits split), on the
King James Bible, and the reference ids of text.txt from the same library.
Needs Debian's python3-sentencepiece (0.1.97 when this was made); run from the
repository root:
    /usr/bin/python3 tests/ref/tokenizers/make_spm.py /tmp/kjv.txt
Writes spm/tokenizer.model and spm/ids.txt (sp.encode(line), no BOS) and
spm/ids_special.txt (BOS first, as Llama 2's tokenizer adds it)."""
import os
import sys

import sentencepiece as spm

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "spm")
os.makedirs(out, exist_ok=True)
verses = [l.rstrip("\n").split(" ", 1)[1] for l in open(sys.argv[1], encoding="utf-8") if " " in l]
spm.SentencePieceTrainer.train(
    sentence_iterator=iter(verses), model_prefix=os.path.join(out, "tokenizer"), model_type="bpe",
    vocab_size=2000, byte_fallback=True, normalization_rule_name="identity", remove_extra_whitespaces=False,
    add_dummy_prefix=True, split_digits=True, allow_whitespace_only_pieces=True, character_coverage=1.0,
    user_defined_symbols=["<|user|>"], minloglevel=2)
os.remove(os.path.join(out, "tokenizer.vocab"))
sp = spm.SentencePieceProcessor(model_file=os.path.join(out, "tokenizer.model"))
lines = open(os.path.join(here, "text.txt"), encoding="utf-8").read().split("\n")[:-1]
with open(os.path.join(out, "ids.txt"), "w") as f:
    for l in lines:
        f.write(" ".join(map(str, sp.encode(l))) + "\n")
with open(os.path.join(out, "ids_special.txt"), "w") as f:
    for l in lines:
        f.write(" ".join(map(str, [sp.bos_id()] + sp.encode(l))) + "\n")
back = sum(sp.decode(sp.encode(l)) == l for l in lines)
print(f"spm: {sp.get_piece_size()} pieces, {len(lines)} lines, {back} decode back", file=sys.stderr)
