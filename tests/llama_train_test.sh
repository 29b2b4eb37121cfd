#!/usr/bin/env bash
# Training today's parts end to end (issue 41), in seconds on Genesis 1-2 (tests/lm/):
# `tscope train --task lm --arch llama` lowers its loss, traces its scores, writes a checkpoint that loads
# and generates with no flag; stopped and resumed it ends with the same weights as a run
# never stopped; each part's flag (--norm rms, --pos rope, --ffn swiglu, --kv-heads N) on
# the GPT changes that part alone, in the settings line and in the saved config; flags
# that contradict each other get one line on stderr and exit 2. Runs ./tscope (or $TSCOPE).
. "$(dirname "$0")/lib.sh"

corpus=tests/lm/genesis-1-2.txt
small=(--corpus "$corpus" --layers 1 --d-model 32 --heads 4 --ffn 48 --seq 32 --batch 8 --heldout 16) # 4 query heads

# the config a checkpoint's metadata holds (plain JSON in its header)
config_of() { python3 -c 'import json,struct,sys; b=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",b[:8])[0]; print(json.loads(b[8:8+n])["__metadata__"]["config"])' "$1"; }

# 1. a short Llama: the loss falls well below ln V, the settings line names its parts
if "$bin" train --task lm --arch llama --kv-heads 2 "${small[@]}" --steps 120 --lr 1e-2 --warmup 10 \
    --eval-every 20 --sample 20 --save "$tmp/l.safetensors" --trace "$tmp/l.tstrace" --every 60 \
    >"$tmp/train.out" 2>&1; then
    lm_loss_fell llama "$tmp/train.out"
    # the trace's scores read today's layout too (the copying score's W_V is v_proj's shared head)
    n=$("$bin" info "$tmp/l.tstrace" 2>&1 | grep -c ' lm\.score\.copying ')
    [ "$n" = 3 ] && ok || bad "llama's training trace: $n copying-score records, want 3 (steps 0, 60, 120)"
    line=$(grep -m1 '^# ' "$tmp/train.out")
    for part in "rotary positions" "rms norm" "rope pairs half" "2 key/value heads" "gated ffn (swiglu)" \
        "no bias in q/k/v out ffn"; do
        case $line in *"$part"*) ok ;; *) bad "llama's settings line lacks '$part': $line" ;; esac
    done
    # no flag needed to read it back: the config is in the checkpoint
    if "$bin" generate --load "$tmp/l.safetensors" --prompt "And God" -n 20 --quiet >"$tmp/g.out" 2>&1; then
        case $(cat "$tmp/g.out") in "And God"*) ok ;; *) bad "generate: $(cat "$tmp/g.out")" ;; esac
    else
        bad "generate --load llama: $(cat "$tmp/g.out")"
    fi
else
    bad "train --arch llama: $(tail -n 3 "$tmp/train.out")"
fi

# 2. --resume: stopped by SIGTERM and resumed, the same weights, bit for bit, as the run never stopped
data_bytes() { # the tensors' bytes of a safetensors file (its metadata says when it was made)
    python3 -c 'import struct,sys; b=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",b[:8])[0]; sys.stdout.buffer.write(b[8+n:])' "$1"
}
resume=(--arch llama --kv-heads 2 "${small[@]}" --dropout 0.1 --steps 150 --eval-every 50 --sample 0)
"$bin" train --task lm "${resume[@]}" --save "$tmp/whole.safetensors" --quiet >"$tmp/whole.out" 2>&1 ||
    bad "the whole run: $(tail -n 2 "$tmp/whole.out")"
"$bin" train --task lm "${resume[@]}" --save "$tmp/part.safetensors" >"$tmp/part.out" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q '^step ' "$tmp/part.out" 2>/dev/null && break; sleep 0.05; done
kill -TERM $pid
wait $pid
k=$(sed -n 's/.*stopped by SIGTERM at step \([0-9]*\) of 150$/\1/p' "$tmp/part.out")
if [ -n "$k" ] && "$bin" train --task lm --resume "$tmp/part.safetensors" --sample 0 --quiet >"$tmp/resumed.out" 2>&1; then
    if cmp -s <(data_bytes "$tmp/whole.safetensors") <(data_bytes "$tmp/part.safetensors"); then
        ok
        echo "ok: llama stopped at step $k of 150 and resumed: the same weights, bit for bit"
    else
        bad "llama resumed from step $k: the weights differ from the run never stopped"
    fi
else
    bad "llama --resume (stopped at '$k'): $(tail -n 3 "$tmp/part.out") $(tail -n 3 "$tmp/resumed.out" 2>/dev/null)"
fi

# 3. one part at a time on the GPT: the settings line and the saved config say it, and only it
part() { # NAME CONFIG-KEY=VALUE LINE-PART FLAGS...
    local name=$1 want=$2 says=$3
    shift 3
    if "$bin" train --task lm "${small[@]}" --steps 3 --sample 0 --quiet "$@" --save "$tmp/$name.safetensors" \
        >"$tmp/$name.out" 2>&1; then
        local cfg
        cfg=$(config_of "$tmp/$name.safetensors")
        case $cfg in *"$want"*) ok ;; *) bad "$*: the saved config lacks $want: $cfg" ;; esac
        case $(grep -m1 '^# ' "$tmp/$name.out") in *"$says"*) ok ;; *) bad "$*: settings line lacks '$says'" ;; esac
    else
        bad "train $*: $(tail -n 2 "$tmp/$name.out")"
    fi
}
part gpt '"pe":"learned"' "learned positions"
grep -q 'norm_kind' <(config_of "$tmp/gpt.safetensors") && bad "the GPT's config names today's parts" || ok
part norm '"norm_kind":"rms"' "rms norm" --norm rms
grep -q '"pe":"learned"' <(config_of "$tmp/norm.safetensors") && ok || bad "--norm rms changed the positions too"
part gemma '"norm_kind":"rms-gemma"' "rms-gemma norm" --norm rms-gemma
part pos '"pe":"rope"' "rotary positions" --pos rope
grep -q '"norm_kind":"layernorm"' <(config_of "$tmp/pos.safetensors") && ok || bad "--pos rope changed the norm too"
part ffn '"gated_ffn":true' "gated ffn (swiglu)" --ffn swiglu
grep -q '"activation":"silu"' <(config_of "$tmp/ffn.safetensors") && ok || bad "--ffn swiglu does not gate with silu"
part geglu '"gated_ffn":true' "gated ffn (geglu)" --ffn geglu # beside small's --ffn 48
grep -q '"ffn":48,' <(config_of "$tmp/geglu.safetensors") && ok || bad "--ffn geglu --ffn 48: the width did not take"
part kv '"kv_heads":1' "1 key/value head" --kv-heads 1
part llama_mlp '"gated_ffn":false' "rotary positions" --arch llama --ffn mlp --activation gelu

# 4. contradictions and impossible shapes: one line, exit 2
refuses "swiglu with relu" "swiglu gates with silu" "$bin" train --task lm "${small[@]}" --ffn swiglu --activation relu
refuses "two widths" "a width was given already" "$bin" train --task lm "${small[@]}" --ffn 64 --ffn 32
refuses "unknown ffn" "mlp, swiglu, geglu" "$bin" train --task lm "${small[@]}" --ffn wide
refuses "--pe and --pos" "give one" "$bin" train --task lm "${small[@]}" --pe rope --pos learned
refuses "kv heads not dividing" "must divide --heads" "$bin" train --task lm "${small[@]}" --kv-heads 3
refuses "resume with a part's flag" "--norm" "$bin" train --task lm --resume "$tmp/part.safetensors" --norm rms

# 5. the shipped model (assets/kjv-llama-char.safetensors, made by `make models`): it loads with no
# flag and says today's parts, writes on from a prompt, and its metadata's held-out loss is the one
# assets/README.md reports beside the GPT's
ship=assets/kjv-llama-char.safetensors
if out=$("$bin" run --load "$ship" --text "And God said" 2>&1); then
    line=$(grep -m1 '^# settings' <<<"$out")
    for part in "norm kind rms" "rope pairs half" "kv heads 2" "ffn swiglu"; do
        case $line in *"$part"*) ok ;; *) bad "$ship: the settings line lacks '$part': $line" ;; esac
    done
else
    bad "run --load $ship: $(tail -n 2 <<<"$out")"
fi
if "$bin" generate --load "$ship" --prompt "And God said" -n 16 --temperature 0 --quiet >"$tmp/ship.out" 2>&1; then
    case $(cat "$tmp/ship.out") in "And God said"?*) ok ;; *) bad "generate --load $ship: $(cat "$tmp/ship.out")" ;; esac
else
    bad "generate --load $ship: $(tail -n 2 "$tmp/ship.out")"
fi
# knocking out key/value head 1 is knocking out the query heads that read it (2 and 3), in the
# cached decoding of generate too
a=$("$bin" generate --load "$ship" --prompt "And God said" -n 16 --temperature 0 --quiet \
    --ablate decoder.layers.0.self_attn.kvhead1 2>&1)
b=$("$bin" generate --load "$ship" --prompt "And God said" -n 16 --temperature 0 --quiet \
    --ablate 'decoder.layers.0.self_attn.head[23]' 2>&1)
[ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" != "$(cat "$tmp/ship.out")" ] && ok ||
    bad "generate with kvhead1 knocked out: '$a'; with heads 2 and 3: '$b'"
heldout=$(python3 -c 'import json,struct,sys; b=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",b[:8])[0]; print(json.loads(b[8:8+n])["__metadata__"]["heldout_loss"])' "$ship")
grep -q "^| \`kjv-llama-char.safetensors\` .* | $heldout nats/char" assets/README.md && ok ||
    bad "assets/README.md does not report $ship's held-out loss $heldout nats/char in its row"

finish
