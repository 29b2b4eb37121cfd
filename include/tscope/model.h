/* model: the Transformer of the seeds, in C, calling a hook at every step.
 *
 * One config (ts_model_config) describes every model tscope builds: seed 000's
 * encoder, seed 001's lone multi-head attention, seed 004's pre-LN classifier,
 * and the encoder-decoder of "Attention Is All You Need". Presets fill it; the
 * model flags of the command line change it; ts_model_config_check explains in
 * one sentence why a config cannot work.
 *
 * Memory follows llm.c: every parameter lives in one block carved by a size
 * table whose rows are named like PyTorch's state_dict, and every activation
 * of a forward pass comes from one arena sized once at init. Inference keeps
 * only what the next step needs: a handful of buffers reused layer after
 * layer, the attention scores turned into weights in place. The hook sees
 * each step before its buffer is reused; a hook that wants to keep values
 * copies them.
 *
 * Trace names (stable; docs/model.md lists them all), for an encoder layer i:
 *   encoder.layers.{i}.self_attn.{qkv, qkv_heads, qkv_perm, q, k, v, scores,
 *       scaled, masked, values, weights, values_perm, concat, out}
 *   encoder.layers.{i}.norm1.{in, mean, std, y, gamma, beta, out}
 *   encoder.layers.{i}.ffn.{hidden, act, dropout, out}, encoder.layers.{i}.norm2.…,
 *   encoder.layers.{i}.out, encoder.norm.… (final norm), encoder.out
 * `masked` appears only when a mask is applied (`values_perm` not with the
 * seed000-reshape variant, see ts_variant); `values` comes before
 * `weights` because seed 000's scaled_dot_product returns (values, attention)
 * and prints them in that order. The decoder has self_attn (causal) and
 * cross_attn (q_proj, q_heads, q, kv, kv_heads, kv_perm, k, v, ...), norm1..3.
 * BERT's parts: token_type_ids (B, S) and embed.token_types (B, S, D) before
 * embed.pe; mlm.{dense, act, norm.*} between the encoder and the logits.
 * See src/model/model_forward.c for the full list and the reasons.
 */
#ifndef TSCOPE_MODEL_H
#define TSCOPE_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tscope/core.h"
#include "tscope/kernels.h"

typedef enum ts_arch {
    TS_ARCH_ENCODER,         /* encoder stack (seed 000, seed 004) */
    TS_ARCH_ENCODER_DECODER, /* encoder + decoder (the paper, tiny, copy) */
    TS_ARCH_ATTENTION,       /* one multi-head attention alone (seed 001) */
    TS_ARCH_DECODER,         /* decoder only, a GPT: one causal stack named decoder.* (lm, gpt2) */
} ts_arch;

typedef enum ts_norm_place { TS_NORM_POST, TS_NORM_PRE } ts_norm_place;
/* Positions added to the embeddings (sinusoidal, learned), none, or RoPE:
 * each head's q and k rotated by angles that grow with the position. */
typedef enum ts_pe_kind { TS_PE_SINUSOIDAL, TS_PE_LEARNED, TS_PE_NONE, TS_PE_ROPE } ts_pe_kind;
/* GELU exact (x * Phi(x), PyTorch's default) or its tanh approximation
 * (approximate='tanh', GPT-2's "gelu_new"). */
typedef enum ts_activation { TS_ACT_RELU, TS_ACT_GELU, TS_ACT_GELU_TANH, TS_ACT_SILU } ts_activation;

/* The norm of the blocks: LayerNorm (mean and variance, gamma and beta),
 * RMSNorm (x / sqrt(mean(x^2) + eps) * w: Llama, Mistral, Qwen2) or Gemma's
 * RMSNorm, which scales by (1 + w). */
typedef enum ts_norm_kind { TS_NORMK_LAYER, TS_NORMK_RMS, TS_NORMK_RMS_GEMMA } ts_norm_kind;

/* How RoPE pairs a head's dimensions: Hugging Face's rotate-half (dimension
 * i with i + r/2, r the rotated dims) or the interleaved form of GPT-J and
 * Meta's original Llama (2i with 2i + 1). */
typedef enum ts_rope_style { TS_ROPE_HALF, TS_ROPE_INTERLEAVED } ts_rope_style;

/* Deliberate departures from the correct model, each the way a seed wrote it,
 * for lessons to compare against the default (model_variants.c). Bits of
 * ts_model_config.variants; 0 is the correct model. */
typedef enum ts_variant {
    TS_VARIANT_NO_SCALE = 1 << 0,          /* scores reach the softmax without / sqrt(hd) */
    TS_VARIANT_SEED000_RESHAPE = 1 << 1,   /* values (B,H,S,hd) reshaped to (B,S,D) unpermuted */
    TS_VARIANT_SEED001_LAYERNORM = 1 << 2, /* LayerNorm over (batch, features): stats per position */
    TS_VARIANT_SEED004_RESIDUAL = 1 << 3,  /* pre-LN block adds dropout(x), not the attention */
    TS_VARIANT_SEED003_MASK = 1 << 4,      /* masks add -1e9 to the scores instead of writing -inf */
    TS_VARIANT_SEED001_SOFTMAX = 1 << 5,   /* softmax as exp(x) / sum(exp(x)), no max subtracted */
    TS_VARIANT_NO_RESIDUAL = 1 << 6,       /* a layer's sublayers replace the stream instead of adding to it */
} ts_variant;
#define TS_VARIANT_ALL 0x7Fu

/* The sinusoidal table's formula (ts_pe_kind TS_PE_SINUSOIDAL only). */
typedef enum ts_pe_variant {
    TS_PE_PAPER,                /* sin(p / 10000^(2i/D)), cos(p / 10000^(2i/D)) */
    TS_PE_SEED001_SIN_ONLY,     /* seed 001's first table: sin in odd dims, exponent (2i+1)/D there */
    TS_PE_SEED001_ODD_EXPONENT, /* seed 001's class: cos in odd dims, exponent (2i+1)/D there */
} ts_pe_variant;

/* What the source's padding masks in the encoder's self-attention (the
 * causal rule is ts_model_config.causal; cross-attention always hides pads). */
typedef enum ts_mask_kind {
    TS_MASK_PADDING,      /* keys at <pad> get -inf (the default) */
    TS_MASK_NONE,         /* pads are attended to like words */
    TS_MASK_PADDING_BOTH, /* also the rows of padded queries: all -inf, weights 0 */
} ts_mask_kind;

typedef enum ts_head_kind {
    TS_HEAD_NONE, /* the last stack's output is the result */
    TS_HEAD_LM,   /* logits over the vocabulary at every position */
    TS_HEAD_CLS,  /* logits over n_labels from the first token (seed 004) */
} ts_head_kind;

typedef enum ts_input_kind {
    TS_INPUT_TOKENS,   /* token ids (B, S): embedding, then positions */
    TS_INPUT_EMBEDDED, /* vectors (B, S, in_dim) as seed 000's random x */
} ts_input_kind;

#define TS_MODEL_NAME_MAX 96

/* Smallest vocabulary for token input: the tokenizer's 4 special tokens
 * (<pad> <bos> <eos> <unk>, see tokenizer.h) and one word. */
#define TS_MODEL_MIN_VOCAB 5

/* How the weight matrices are stored and read (--dtype). */
typedef enum ts_dtype { TS_DTYPE_F32, TS_DTYPE_BF16 } ts_dtype;

typedef struct ts_model_config {
    char preset[16];    /* where it came from, "" when built from flags alone */
    ts_arch arch;
    int d_model;        /* D */
    int heads;          /* H; D / H = hd */
    int ffn;            /* F, the feed-forward hidden width */
    int layers;         /* encoder layers */
    int dec_layers;     /* decoder layers (0 unless TS_ARCH_ENCODER_DECODER) */
    int vocab;          /* V; 0 = as many as the tokenizer needs */
    int seq;            /* S, source length */
    int tgt_seq;        /* T, decoder length */
    int batch;          /* B */
    int in_dim;         /* width of embedded input; 0 = d_model (seed 001: 1024) */
    int max_pos;        /* rows of the learned position table; 0 = max(S, T) */
    int n_labels;       /* classes of TS_HEAD_CLS */
    float dropout;      /* probability, used only while training */
    float eps;          /* LayerNorm eps of the blocks */
    float embed_eps;    /* LayerNorm eps of learned embeddings (seed 004: 1e-12) */
    ts_norm_place norm;
    ts_pe_kind pe;
    ts_activation activation;
    ts_head_kind head;
    ts_input_kind input;
    bool final_norm;    /* a LayerNorm after each stack (pre-LN models want it) */
    bool causal;        /* encoder / lone attention: position i sees only j <= i */
    bool tgt_not_causal; /* the decoder's self-attention sees every position (--tgt-mask none); false: causal */
    bool scale_embed;   /* multiply token embeddings by sqrt(D), as the paper */
    bool tie_embed;     /* one token table for source, target and the logits */
    unsigned variants;  /* ts_variant bits; 0 = the correct model */
    ts_pe_variant pe_variant;
    ts_mask_kind mask;
    bool ln_std_eps;    /* LayerNorm as the Annotated Transformer writes it: (x - mean) / (unbiased std + eps) */
    float mask_fill;    /* what a hidden score is written as, masked_fill(mask, fill): 0 = -inf (the default);
                           a negative number, as the Annotated Transformer's -1e9 (ts_model_mask_fill) */
    bool train_mode;    /* forward as in training (dropout on): ts_model_init sets training */
    uint64_t seed;      /* parameters, random input, dropout */
    const char *text;   /* the preset's sentence, or NULL (random tokens) */
    /* Today's blocks (Llama, Mistral, Qwen2, Gemma, GPT-NeoX), each a declared
     * choice; 0 everywhere is the block of 2017 and GPT-2. A GPT (decoder) only. */
    ts_norm_kind norm_kind;
    int kv_heads;       /* key/value heads, shared by heads / kv_heads query heads each; 0 = heads */
    int head_dim;       /* each head's width; 0 = d_model / heads */
    bool split_qkv;     /* q, k and v projected apart (q_proj, k_proj, v_proj), not one packed in_proj */
    bool no_qkv_bias;   /* q, k and v projections without bias (Llama) */
    bool no_out_bias;   /* the attention's output projection without bias */
    bool no_ffn_bias;   /* the FFN's linears without bias */
    bool gated_ffn;     /* down(act(gate(x)) * up(x)): SwiGLU with silu, GeGLU with gelu */
    bool parallel_residual; /* x + attn(norm1(x)) + ffn(norm2(x)), GPT-NeoX's use_parallel_residual */
    ts_rope_style rope_style;
    float rotary_pct;   /* share of each head's dims RoPE rotates (GPT-NeoX's rotary_pct); 0 = all */
    float rope_theta;   /* RoPE's base; 0 = 10000 */
    /* BERT's parts (an encoder over tokens): each a declared choice, 0 = absent. */
    int type_vocab;     /* token types (BERT's segments A and B): rows of embed.token_types, added to the
                           token and position embeddings; 0 = none */
    bool mlm_head;      /* the vocabulary head reads a transform first: dense, activation, LayerNorm
                           (BERT's masked-LM head), then the (tied) decoder and its bias */
    ts_dtype dtype;     /* how the weight matrices are read: float32, or bf16 (ts_model_set_dtype) */
} ts_model_config;

/* What a config's head width, key/value heads, rotated dims and RoPE base
 * come to once their defaults are filled in. */
int ts_model_head_dim(const ts_model_config *cfg);
int ts_model_kv_heads(const ts_model_config *cfg);
int ts_model_rotary_dims(const ts_model_config *cfg);
double ts_model_rope_theta(const ts_model_config *cfg);
/* What a hidden score becomes: -inf, or the config's finite mask_fill (a row
 * with every key hidden then weighs its keys alike, as PyTorch's masked_fill
 * with -1e9 does, where -inf gives weights 0). */
float ts_model_mask_fill(const ts_model_config *cfg);
/* The fill as code writes it: "-inf", "-1e9", "-10000". */
const char *ts_model_mask_fill_text(char *buf, size_t size, const ts_model_config *cfg);
/* Whether a finite fill (--mask-fill) weighs a wholly hidden row's keys alike
 * where -inf gives zeros; any fill at or below this hides a key exactly
 * (weight 0) in a row that keeps one whose score is above fill + 104. */
#define TS_MASK_FILL_HIDES (-1e4f)

/* Whether the config uses any of today's block choices above. */
bool ts_model_is_modern(const ts_model_config *cfg);
/* Whether the config has BERT's parts: token types or the masked-LM head. */
bool ts_model_is_bert(const ts_model_config *cfg);
/* Whether the config is a masked language model: a vocabulary head over an
 * encoder that sees both ways (BERT), whose logits at a position score the
 * token there, not the next one. */
bool ts_model_is_masked_lm(const ts_model_config *cfg);

/* Names of the presets, "tiny, seed000, ..." for messages and --help. */
const char *ts_model_preset_names(void);

/* Fill cfg with a preset. An unknown name is TS_ERR_ARG naming the presets. */
ts_status ts_model_config_preset(ts_model_config *cfg, const char *name);

/* Whether the config is a language model: one causal stack over token ids
 * with a vocabulary head (a GPT), what tscope train --task lm trains. */
bool ts_model_is_lm(const ts_model_config *cfg);

/* The one self-attention stack of a model without cross-attention: "decoder"
 * for a GPT (TS_ARCH_DECODER), "encoder" otherwise; the first word of its
 * layers' names ("decoder.layers.0.self_attn.weights"). */
const char *ts_model_stack_name(const ts_model_config *cfg);

/* Whether the embedding's sum goes through a LayerNorm (embed.norm): with
 * learned positions, as BERT and seed 004 do; a GPT adds and goes on. */
bool ts_model_embed_norm(const ts_model_config *cfg);

/* Whether the config can be built, with a sentence a learner can act on:
 * "--heads 7 does not divide --d-model 512 (...): the reshape of qkv
 * [30, 200, 1536] to [30, 200, 7, 219] fails". */
ts_status ts_model_config_check(const ts_model_config *cfg);

/* ---- parameters ---------------------------------------------------------- */


/* How a parameter is stored, when it differs from PyTorch's layout. */
typedef enum ts_param_layout {
    TS_LAYOUT_TORCH,      /* exactly as in PyTorch's state_dict */
    TS_LAYOUT_QKV_HEADS,  /* in_proj rows per head [q_h; k_h; v_h] (seed 000's qkv) */
    TS_LAYOUT_Q_KV_HEADS, /* in_proj rows [Wq; then per head k_h; v_h] (cross-attention) */
} ts_param_layout;

/* How a parameter starts, PyTorch's defaults for the module it comes from. */
typedef enum ts_param_init {
    TS_INIT_ZEROS,
    TS_INIT_ONES,
    TS_INIT_UNIFORM, /* uniform(-scale, scale): Linear's 1/sqrt(fan_in), in_proj's xavier */
    TS_INIT_NORMAL,  /* normal(0, scale): embeddings */
} ts_param_init;

typedef struct ts_model_param_info {
    char name[TS_MODEL_NAME_MAX]; /* "encoder.layers.0.self_attn.in_proj_weight" */
    int rank;
    int64_t shape[2];
    int64_t numel;
    size_t offset;                /* in floats, from the start of the block (64-byte aligned) */
    ts_param_layout layout;
    ts_param_init init;
    float init_scale;
} ts_model_param_info;

typedef struct ts_attn_weights {
    float *in_w;  // (3D, Din) see ts_param_layout; NULL with split_qkv
    float *in_b;  // (3D), or NULL without q/k/v biases
    float *q_w, *q_b; // split_qkv: (H*hd, D), (H*hd)
    float *k_w, *k_b; // split_qkv: (KV*hd, D), (KV*hd)
    float *v_w, *v_b; // split_qkv: (KV*hd, D), (KV*hd)
    float *out_w; // (D, H*hd)
    float *out_b; // (D), or NULL without an output bias
} ts_attn_weights;

typedef struct ts_norm_weights {
    float *gamma, *beta; // (D); an RMSNorm has no beta (NULL)
} ts_norm_weights;

typedef struct ts_ffn_weights {
    float *w1, *b1; // (F, D), (F): the hidden layer (a gated FFN's up projection)
    float *wg, *bg; // (F, D), (F): a gated FFN's gate, or NULL
    float *w2, *b2; // (D, F), (D): back to D (down)
} ts_ffn_weights;

typedef struct ts_self_attn_layer_weights {
    ts_attn_weights self_attn;
    ts_norm_weights norm1;
    ts_ffn_weights ffn;
    ts_norm_weights norm2;
} ts_self_attn_layer_weights;

typedef struct ts_cross_attn_layer_weights {
    ts_attn_weights self_attn, cross_attn;
    ts_norm_weights norm1, norm2, norm3;
    ts_ffn_weights ffn;
} ts_cross_attn_layer_weights;

typedef struct ts_embed_weights {
    float *tokens;    // (V, D) or NULL for embedded input
    float *types;     // (type_vocab, D) token types (BERT), or NULL
    float *positions; // (max_pos, D) learned positions, or NULL
    ts_norm_weights norm; // learned embeddings' LayerNorm (gamma NULL otherwise)
} ts_embed_weights;

/* Pointers into a block laid out by the size table. The same offsets point a
 * gradient block (training) or an optimizer's moments: see ts_model_point. */
typedef struct ts_model_weights {
    ts_embed_weights embed, dec_embed;
    /* The self-attention stack: an encoder's layers, or a GPT's (traced decoder.layers) */
    ts_self_attn_layer_weights *layers; // (layers), owned by the model
    ts_norm_weights norm;               // its closing norm (encoder.norm, or a GPT's decoder.norm)
    /* The encoder-decoder's decoder: self-attention, cross-attention, FFN */
    ts_cross_attn_layer_weights *cross_layers; // (dec_layers), owned by the model
    ts_norm_weights cross_norm;                // decoder.norm
    ts_attn_weights attn;       // TS_ARCH_ATTENTION only
    float *head_w, *head_b;     // (V or n_labels, D), (V or n_labels)
    float *mlm_w, *mlm_b;       // (D, D), (D): the masked-LM head's dense transform, or NULL
    ts_norm_weights mlm_norm;   // its LayerNorm
} ts_model_weights;

/* A model's module, for the table of `tscope shapes`. */
typedef struct ts_model_module {
    char name[TS_MODEL_NAME_MAX]; /* "encoder.layers.0.self_attn" */
    int rank;
    int64_t shape[TS_MAX_RANK];   /* its output */
    int64_t params;
    double flops;                 /* matmul flops, 2*M*N*K each */
} ts_model_module;

typedef struct ts_model_summary {
    ts_model_module *modules; /* (count), owned */
    int count;
    int64_t params;
    double flops;             /* matmul flops of one forward */
    size_t param_bytes;
    size_t arena_bytes;       /* what tscope allocates for activations */
    size_t kept_bytes;        /* what keeping every step's output would take (in a trace: views cost nothing) */
    int steps;                /* hook calls */
} ts_model_summary;

typedef struct ts_model {
    ts_model_config cfg;
    int S, T, L;              /* source, target lengths; L = max(S, T) */
    bool dry;                 /* shapes only: nothing allocated or computed */
    bool training;            /* dropout on */
    uint64_t dropout_calls;   /* advances the dropout stream */
    int64_t empty_rows;       /* attention rows fully masked in the last forward (weights 0) */
    ts_model_param_info *params;   /* the size table (n_params rows) */
    int n_params;
    int64_t n_floats;         /* size of the parameter block */
    float *block;             /* (n_floats) the parameters, owned; NULL when dry */
    ts_bf16 *bf16;            /* (n_floats) the matrices' bf16 copy at the block's offsets (only rank-2
                                 parameters written), owned; NULL unless cfg.dtype is bf16 */
    ts_model_weights w;
    ts_arena arena;           /* activations */
    size_t arena_bytes;
    void *acts;               /* carved activation buffers (private) */
    ts_model_summary *summary; /* filled during a dry run (private) */
} ts_model;

/* Build the size table, allocate and initialise the parameters (seeded:
 * xavier-uniform in_proj as PyTorch, uniform(+-1/sqrt(fan_in)) linears,
 * normal embeddings, LayerNorm 1 and 0) and the activation arena. */
ts_status ts_model_init(ts_model *m, const ts_model_config *cfg);

/* ts_model_init with the parameters' memory left as it comes: for a loader
 * that places every parameter itself (and says so when one is missing). */
ts_status ts_model_init_unset(ts_model *m, const ts_model_config *cfg);

/* The same tables with no memory: for ts_model_dry_run. */
ts_status ts_model_init_dry(ts_model *m, const ts_model_config *cfg);

void ts_model_free(ts_model *m);

/* --dtype bf16: every weight matrix (each parameter of rank 2: the linears,
 * the embedding tables) rounded to bf16 (to nearest, ties to even), kept in
 * m->bf16 at the block's offsets, and the linears read from there
 * (ts_gemm_bf16: widened as packed, summed in float32). The float32 block is
 * rounded to the same values, so whatever else reads the weights (the
 * embedding gather, the backward, the lens, the scores) computes the same
 * bf16 model. Vectors (norms' weights, biases) stay float32. Call it once the
 * weights are final (after loading); TS_DTYPE_F32 drops the copy (the
 * rounding stays). A bf16 file's values are bf16 already: rounding keeps them. */
ts_status ts_model_set_dtype(ts_model *m, ts_dtype dtype);

/* Where a linear reads weight matrix w from: its bf16 copy when the model
 * has one and w is in its block, else NULL (read w as float32). */
const ts_bf16 *ts_model_bf16_of(const ts_model *m, const float *w);

/* A single-stack model built for cfg.seq = N runs on S <= N positions from
 * now on (m->S = S), in the activation memory it has: what `tscope live`
 * needs as the text grows and shrinks. Weights are untouched. */
ts_status ts_model_set_length(ts_model *m, int S);

/* Point w at `block`, a buffer of m->n_floats laid out like the parameters
 * (a gradient block, say). w's layer arrays are allocated; free with
 * ts_model_weights_free. */
ts_status ts_model_point(const ts_model *m, float *block, ts_model_weights *w);
void ts_model_weights_free(ts_model_weights *w);

/* Index of a parameter by its state_dict name, or -1. Also found: the names of
 * nn.TransformerEncoder ("layers.0.…", "norm.weight", read as "encoder.…")
 * and of a lone nn.MultiheadAttention ("in_proj_weight", read as "self_attn.…"). */
int ts_model_find_param(const ts_model *m, const char *name);

/* The stored parameter as a view with its PyTorch shape. Careful: in_proj
 * rows are stored per head (see ts_param_layout); use ts_model_load_param and
 * ts_model_export_param to exchange values in PyTorch's order. */
ts_status ts_model_param(ts_model *m, const char *name, ts_tensor *view);

/* Copy src (PyTorch's layout and shape) into the parameter `name`. A wrong
 * shape names the tensor and both shapes; an unknown name lists the model's. */
ts_status ts_model_load_param(ts_model *m, const char *name, const ts_tensor *src);

/* Parameter i in PyTorch's layout, into dst (numel floats). */
void ts_model_export_param(const ts_model *m, int i, float *dst);

/* ---- forward --------------------------------------------------------------- */

/* What a forward reads. Give ids or embedded vectors for the source; for an
 * encoder-decoder also the target (ids or vectors), or `memory` to skip the
 * encoder (a decoder alone, as nn.TransformerDecoderLayer is tested). Pads are
 * 1 where a position is padding (PyTorch's key_padding_mask, True = pad): keys
 * there get -inf before the softmax. src_pad masks the encoder's keys, tgt_pad
 * the decoder's self-attention keys; cross-attention hides the memory's keys
 * in mem_pad when mem_pad_set (nn.Transformer's memory_key_padding_mask, which
 * may be NULL while src_pad is not), else those of src_pad (text runs: the
 * memory is the padded source). Each mask given is traced first, as 0/1
 * (B, S) steps named after nn.Transformer.forward's arguments:
 * src_key_padding_mask, tgt_key_padding_mask, memory_key_padding_mask. */
typedef struct ts_model_input {
    const int32_t *src_ids;     // (B, S)
    const int32_t *src_types;   // (B, S) token types in [0, type_vocab), or NULL: all 0 (BERT's token_type_ids)
    const float *src_embedded;  // (B, S, in_dim)
    const uint8_t *src_pad;     // (B, S) or NULL
    const int32_t *tgt_ids;     // (B, T)
    const float *tgt_embedded;  // (B, T, D)
    const uint8_t *tgt_pad;     // (B, T) or NULL
    const float *memory;        // (B, S, D) or NULL
    const uint8_t *mem_pad;     // (B, S) or NULL: cross-attention's padded keys, when mem_pad_set
    bool mem_pad_set;           // false: cross-attention hides src_pad's keys
} ts_model_input;

/* Run the model; `out` becomes a view of the result (logits, or the last
 * stack's output), valid until the next forward. The hook (may be NULL) sees
 * every step in order; a non-OK status from it stops the pass. */
ts_status ts_model_forward(ts_model *m, const ts_model_input *in, const ts_hook *hook, ts_tensor *out);

void ts_model_set_training(ts_model *m, bool training);

/* The steps, their shapes, FLOPs and memory, with nothing computed: the hook
 * receives tensors whose data is NULL. sum may be NULL. */
ts_status ts_model_dry_run(const ts_model_config *cfg, const ts_hook *hook, ts_model_summary *sum);
void ts_model_summary_free(ts_model_summary *sum);

/* The paper's positional encoding (rows, D): PE(pos, 2i) = sin(pos / 10000^(2i/D)),
 * PE(pos, 2i+1) = cos(pos / 10000^(2i/D)), computed in double. */
void ts_model_sinusoid(float *pe, int rows, int D);

/* ---- names (model_config.c) ------------------------------------------------ */

/* Each setting's words, as flags take them and trace metadata records them;
 * spelled here once. A name of a value out of range is "?". parse: TS_ERR_ARG
 * naming the flag (`what`, e.g. "--norm") and the choices. */
const char *ts_model_arch_name(ts_arch a);             /* "encoder", "encoder-decoder", "attention", "decoder" */
const char *ts_model_norm_name(ts_norm_place n);       /* "post", "pre" */
const char *ts_model_pe_name(ts_pe_kind p);            /* "sinusoidal", "learned", "none", "rope" */
const char *ts_model_activation_name(ts_activation a); /* "relu", "gelu", "gelu-tanh", "silu" */
const char *ts_model_norm_kind_name(ts_norm_kind k);   /* "layernorm", "rms", "rms-gemma" */
const char *ts_model_rope_style_name(ts_rope_style r); /* "half", "interleaved" */
const char *ts_model_head_name(ts_head_kind h);        /* "none", "lm", "cls" */
const char *ts_model_input_name(ts_input_kind i);      /* "tokens", "embedded" */
const char *ts_model_dtype_name(ts_dtype d);           /* "f32", "bf16" */
ts_status ts_model_dtype_parse(const char *word, const char *what, ts_dtype *out);
ts_status ts_model_norm_parse(const char *word, const char *what, ts_norm_place *out);
ts_status ts_model_pe_parse(const char *word, const char *what, ts_pe_kind *out);
ts_status ts_model_activation_parse(const char *word, const char *what, ts_activation *out);
ts_status ts_model_norm_kind_parse(const char *word, const char *what, ts_norm_kind *out);
ts_status ts_model_rope_style_parse(const char *word, const char *what, ts_rope_style *out);

/* ---- variants (model_variants.c) ------------------------------------------ */

/* The table of --pe-variant `v` (rows, D), computed in double. */
void ts_model_pe_table(float *pe, int rows, int D, ts_pe_variant v);

/* Words separated by spaces or commas ("no-scale seed000-reshape") -> bits
 * or-ed into *bits; an unknown word is TS_ERR_ARG naming the choices. */
ts_status ts_model_variant_parse(const char *words, unsigned *bits);
ts_status ts_model_pe_variant_parse(const char *name, ts_pe_variant *out);
ts_status ts_model_mask_parse(const char *name, ts_mask_kind *out, bool *causal);

/* "no-scale seed000-reshape", or "" for 0. */
void ts_model_variant_names(unsigned bits, char *buf, size_t size);
const char *ts_model_pe_variant_name(ts_pe_variant v); /* "paper", ... */
const char *ts_model_mask_name(ts_mask_kind m);        /* "padding", ... */

/* Why the variants cannot apply to this config (called by ts_model_config_check). */
ts_status ts_model_variants_check(const ts_model_config *cfg);

/* ---- random numbers ------------------------------------------------------ */

/* n samples of N(0, 1), the same for the same seed on every machine. */
void ts_model_randn(float *out, int64_t n, uint64_t seed);

/* n ids uniform in [lo, hi). */
void ts_model_random_ids(int32_t *out, int64_t n, int32_t lo, int32_t hi, uint64_t seed);

/* ---- decoding with a cache (model_decode.c) ---------------------------------
 *
 * New tokens through a causal stack (a GPT, or a causal encoder with a
 * vocabulary head), keeping every layer's keys and values so each step
 * computes only the new positions: generation is linear in the text, not
 * quadratic. The steps are the forward pass's own (model_forward.c) over a
 * range of new positions, so the logits equal a full pass's at those
 * positions to float rounding, and a hook sees the steps as in a full pass
 * (shapes: the new positions; k, v and the weights: every cached one). */
typedef struct ts_kv_cache {
    int capacity;   /* positions the model has (its learned table, or seq) */
    int len;        /* positions decoded so far */
    int rows;       /* new positions one call takes at most */
    float *k, *v;   /* (layers, capacity, D) */
    void *acts;     /* the pass's buffers (private) */
    void *block;    /* their memory */
} ts_kv_cache;

/* Whether cfg can decode with a cache; *why (may be NULL) says why not. */
bool ts_model_can_cache(const ts_model_config *cfg, const char **why);
ts_status ts_kv_cache_init(ts_kv_cache *kv, const ts_model *m); /* empty: len 0 */
void ts_kv_cache_free(ts_kv_cache *kv);

/* Append n tokens (1 <= n <= kv->rows) at positions kv->len..; *logits
 * (n, V) are the scores of the token after each, valid until the next call.
 * hook (may be NULL) sees every step. Past the model's positions is an error. */
ts_status ts_model_decode(ts_model *m, ts_kv_cache *kv, const int32_t *ids, int n, const ts_hook *hook,
                          const float **logits);

/* One token: ts_model_decode with n = 1 and no hook; *logits (V). */
ts_status ts_model_decode_step(ts_model *m, ts_kv_cache *kv, int32_t id, const float **logits);

/* ---- the closing norm and the head, row by row (model_head.c) ---------------
 *
 * What the forward does after the last layer, for any rows of a residual
 * stream: the logit lens and direct logit attribution read a layer's stream
 * through them. The weights are the model's own; the arithmetic the forward's
 * (the LayerNorm kernel, the head's GEMM with its bias). */

/* The norm the head reads after: the last stack's (an encoder-decoder's
 * decoder.norm, else the single stack's), or NULL when the model has none. */
const ts_norm_weights *ts_model_final_norm_weights(const ts_model *m);

/* out (rows, D) = the final norm of x (rows, D), with its mean and rstd
 * (rows, each may be NULL); without a final norm out is a copy of x, mean 0
 * and rstd 1. out must not overlap x. */
void ts_model_final_norm_rows(const ts_model *m, float *out, float *mean, float *rstd, const float *x,
                              int64_t rows);

/* logits (rows, V) = x (rows, D) @ head_w^T + head_b: the language model's
 * head (V = vocab), or the classifier's (V = n_labels). A model with no head
 * (TS_HEAD_NONE) leaves logits as it is. */
void ts_model_head_rows(const ts_model *m, float *logits, const float *x, int64_t rows);

/* out (rows, D) = BERT's masked-LM transform of x (rows, D), LayerNorm(act(x
 * W^T + b)), what the head reads after the last layer; a copy of x for a
 * model without it. scratch holds rows * D floats; none of out, scratch and x
 * overlap. */
void ts_model_mlm_rows(const ts_model *m, float *out, float *scratch, const float *x, int64_t rows);

/* ---- sampling (model_sample.c) ------------------------------------------- */

/* The next token from one row of logits (V). temperature 0: the argmax (the
 * first of equal ones). Otherwise softmax(logits / temperature) over the
 * top_k largest logits (0: all; ties at the k-th value are kept), and the
 * token where the cumulative probability passes u (uniform in [0, 1)).
 * probs (V, may be NULL) receives the distribution drawn from: 0 outside the
 * top k; with temperature 0, 1 at the argmax. A row holding NaN or +inf has
 * nothing to draw from: -1, and probs all NaN (so a trace shows it). */
int32_t ts_model_sample(const float *logits, int V, float temperature, int top_k, double u, float *probs);

/* The largest of one row of logits (V): its index, the first of equal ones
 * (what ts_model_sample draws at temperature 0, and greedy decoding writes). */
int32_t ts_model_argmax(const float *logits, int V);

/* The step `probs` (B, S, V): the softmax of logits (B, S, V) at `temperature`
 * (1: the model's own distribution), handed to hook after the forward pass,
 * so a trace has what the model predicts next as chances, not only scores
 * (model_probs.c). Nothing without a hook function, or for logits not of rank 3. */
ts_status ts_model_probs_step(const ts_hook *hook, const ts_tensor *logits, float temperature);
/* The same with the probabilities written over the logits, for a caller
 * done with them: GPT-2's 206 MB need no fresh memory, whose every page the
 * system would zero first. Contiguous logits only. */
ts_status ts_model_probs_step_in_place(const ts_hook *hook, ts_tensor *logits, float temperature);

/* Room for ts_model_config_describe's line with every choice of today's blocks. */
#define TS_MODEL_DESCRIBE_MAX 640

/* One line describing the config: "tiny encoder-decoder: B1 S4 T4, d_model 16,
 * 2 heads, ffn 32, 2+2 layers, post-LN, relu, ...", then what differs from
 * the correct model (variants, mask, train mode) (model_describe.c). */
void ts_model_config_describe(const ts_model_config *c, char *buf, size_t size);

#endif
