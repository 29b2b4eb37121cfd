#!/usr/bin/env python3
"""The lines every tokenizer of tests/ref/tokenizers/ is checked on (text.txt):
320 verses of the King James Bible (Debian's bible-kjv: `bible -f Gen1:1-Rev22:21`),
every 97th verse, some upper-cased or with doubled spaces and tabs, then hand-written
lines of Unicode and hostile text. Standard library only.
    python3 make_text.py KJV.txt > text.txt
"""
import sys

verses = [l.rstrip("\n").split(" ", 1)[1] for l in open(sys.argv[1], encoding="utf-8") if " " in l]
out = []
for k, v in enumerate(verses[::97][:320]):
    if k % 10 == 3:
        v = v.upper()
    elif k % 10 == 5:
        v = v.replace(" ", "  ", 3)
    elif k % 10 == 7:
        v = v.replace(" ", "\t", 2)
    elif k % 10 == 9:
        v = "  " + v + "   "
    out.append(v)

out += [
    "Hello world, it's GPT-2. I'm sure they'll say we've done it; you'd've said so?",
    "IT'S LOUD: WE'LL SEE, THEY'RE HERE, I'D GO, YOU'VE GOT IT, I'M OK.",
    "Numbers: 1 12 123 1234 12345 3.14159 1,000,000 2024-01-31 0x1F 1e-9",
    "Café naïve résumé coöperate Ångström façade jalapeño Øresund Straße",
    "ÉCOLE ÉLÈVE ÀÉÎÕÜ ÇA VA? Crème brûlée, déjà vu, fiancée, piñata",
    "Ελληνικά: Η ΟΔΟΣ ΚΑΙ Ο ΛΟΓΟΣ. λόγος καὶ ἀλήθεια",
    "Русский текст: Привет, как дела? ЁЛКА ёлка",
    "中文文本：你好，世界！天地玄黄，宇宙洪荒。",
    "日本語のテキスト：こんにちは、世界。カタカナとひらがな。",
    "한국어 텍스트: 안녕하세요, 세계! 한글",
    "עברית: שלום עולם. العربية: مرحبا بالعالم",
    "हिन्दी: नमस्ते दुनिया। தமிழ்: வணக்கம்",
    "Emoji: 😀 👍🏽 👨‍👩‍👧 🇫🇷 ❤️ ✨ 🎉🎉🎉",
    "Math: ∑ ∫ √2 ≤ ≥ ≠ ∞ α+β=γ ½ ¾ ² ³ ① Ⅻ",
    "Symbols: © ® ™ § ¶ † ‡ • … — – « » „ “ ” ‘ ’ ¿ ¡",
    "Punctuation!!! ??? ... ,,, ;;; ::: --- ___ *** ### @@@ $$$ %%% ^^^ &&& ((())) [[]] {{}}",
    "Code: for (int i = 0; i < n; i++) { x[i] += y[i] * 2; } // done",
    "def f(x):\treturn x ** 2  # squares",
    "URL https://example.com/a/b?c=d&e=f#g and mail someone@example.org",
    "Combining: e\u0301 a\u0308 n\u0303 o\u0302 A\u030a c\u0327",
    "NFC vs NFD: \u00e9 e\u0301 \u00c5 A\u030a \u212b \u1e9b\u0323",
    "Zero width: a\u200bb c\u200cd e\u200de f\u2060g soft\u00adhyphen",
    "Spaces: a\u00a0b c\u2003d e\u3000f g\u2009h i\u202fj",
    "Controls: a\u0001b c\u007fd e\u0085f g\u001bh",
    "Private use: \ue000\ue001 and replacement \ufffd char",
    "Long word: " + "supercalifragilisticexpialidocious" * 4,
    "Antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
    "A" * 120,
    "ab" * 80,
    "     leading and trailing spaces     ",
    "\t\ttabs\tin\tthe\tmiddle\t\t",
    "mixed   \t  \t white   space",
    "a",
    " ",
    "'",
    "''''",
    "'s 't 're 've 'm 'll 'd 'S 'T 'RE 'x",
    "don't won't can't shouldn't isn't",
    "<|endoftext|> special tokens <|begin_of_text|> [CLS] [SEP] [MASK] <s> </s> <unk>",
    "x<|endoftext|>y<|endoftext|><|endoftext|>z",
    "[CLS]hello[SEP] [UNK] [PAD]",
    "snake_case camelCase PascalCase kebab-case SCREAMING_CASE",
    "123abc abc123 a1b2c3 ½half 3rd 2nd 1st",
    "Tab\tthen\tnewline-free\tline",
    "Dollar $100.00, Euro €50, Yen ¥1000, Pound £20, Rupee ₹500",
    "mañana, São Paulo, Zürich, Kraków, Reykjavík, İstanbul, Ålesund",
    "ΣΊΣΥΦΟΣ Σίσυφος ΟΔΥΣΣΕΥΣ ΣΑΣ",
    "İİİ ııı ǅ ǈ ǋ ﬁ ﬂ ẞ ß",
    "Ｆｕｌｌｗｉｄｔｈ　ｔｅｘｔ　１２３",
    "Tibetan ཀ་ཁ་ག Thai ภาษาไทย Lao ພາສາລາວ",
    "Ethiopic ሰላም Armenian Բարեւ Georgian გამარჯობა",
    "Devanagari digits १२३ Arabic digits ٠١٢٣ Thai digits ๑๒๓",
    "Ancient: 𐌀𐌁𐌂 𝐀𝐁𝐂 𝔸𝔹ℂ 𝟙𝟚𝟛",
    "And God said, Let there be light:\u00a0and there was light.",
    "verse 1:1 In the beginning. VERSE 1:2 AND THE EARTH.",
]
for line in out:
    assert "\n" not in line and "\r" not in line
    sys.stdout.write(line + "\n")
