#!/usr/bin/python3
"""Two SentencePiece BPE models with byte fallback, trained on the King James
Bible, and the reference ids of text.txt from the same library: spm/ as Llama
2's was set up (identity normalization, dummy prefix, extra spaces kept, digits
split), spm-strip/ without the dummy prefix (as Gemma) and with extra spaces
removed (the trainer's default).
Needs Debian's python3-sentencepiece (0.1.97 when this was made); run from the
repository root:
    /usr/bin/python3 tests/ref/tokenizers/make_spm.py /tmp/kjv.txt
Writes DIR/tokenizer.model and DIR/ids.txt (sp.encode(line), no BOS) and
DIR/ids_special.txt (BOS first, as Llama 2's tokenizer adds it) and
DIR/decoded.txt (sp.decode of each line's ids)."""
import os
import sys

import sentencepiece as spm

here = os.path.dirname(os.path.abspath(__file__))
verses = [l.rstrip("\n").split(" ", 1)[1] for l in open(sys.argv[1], encoding="utf-8") if " " in l]
lines = open(os.path.join(here, "text.txt"), encoding="utf-8").read().split("\n")[:-1]
for name, dummy, strip in [("spm", True, False), ("spm-strip", False, True)]:
    out = os.path.join(here, name)
    os.makedirs(out, exist_ok=True)
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(verses), model_prefix=os.path.join(out, "tokenizer"), model_type="bpe",
        vocab_size=2000, byte_fallback=True, normalization_rule_name="identity", remove_extra_whitespaces=strip,
        add_dummy_prefix=dummy, split_digits=True, allow_whitespace_only_pieces=True, character_coverage=1.0,
        user_defined_symbols=["<|user|>"], minloglevel=2)
    os.remove(os.path.join(out, "tokenizer.vocab"))
    sp = spm.SentencePieceProcessor(model_file=os.path.join(out, "tokenizer.model"))
    with open(os.path.join(out, "ids.txt"), "w") as f:
        for l in lines:
            f.write(" ".join(map(str, sp.encode(l))) + "\n")
    with open(os.path.join(out, "ids_special.txt"), "w") as f:
        for l in lines:
            f.write(" ".join(map(str, [sp.bos_id()] + sp.encode(l))) + "\n")
    with open(os.path.join(out, "decoded.txt"), "w", encoding="utf-8") as f:
        for l in lines:
            f.write(sp.decode(sp.encode(l)) + "\n")
    back = sum(sp.decode(sp.encode(l)) == l for l in lines)
    print(f"{name}: {sp.get_piece_size()} pieces, {len(lines)} lines, {back} decode back", file=sys.stderr)
