/* Tensor views: reshape, permute, chunk, contiguous, shape text, and the
 * errors a learner sees when shapes do not fit; the layer in a step's name.
 * Expected values are written out by hand from what PyTorch does with the
 * same calls. */
#include <string.h>

#include "check.h"
#include "tscope/core.h"

static float data24[24];

static int setup(void **state) {
    (void)state;
    for (int i = 0; i < 24; i++) data24[i] = (float)i;
    return 0;
}

static ts_tensor make(int rank, const int64_t *shape) {
    ts_tensor t;
    assert_ok(ts_tensor_view(&t, data24, rank, shape));
    return t;
}

static void reshape_contiguous_is_a_view(void **state) {
    (void)state;
    ts_tensor t = make(3, (int64_t[]){2, 3, 4}), r;
    assert_ok(ts_tensor_reshape(&r, &t, 2, (int64_t[]){6, 4}));
    assert_shape(&r, 6, 4);
    assert_ptr_equal(r.data, t.data);
    assert_int_equal(r.stride[0], 4);
    assert_ok(ts_tensor_reshape(&r, &t, 3, (int64_t[]){4, -1, 2}));
    assert_shape(&r, 4, 3, 2);
    assert_float_equal(ts_tensor_get(&r, (int64_t[]){3, 2, 1}), 23.0f, 0);
}

static void reshape_wrong_count_explains(void **state) {
    (void)state;
    float big;
    ts_tensor t, r;
    assert_ok(ts_tensor_view(&t, &big, 3, (int64_t[]){30, 200, 1536}));
    assert_int_equal(ts_tensor_reshape(&r, &t, 4, (int64_t[]){30, 200, 7, 219}), TS_ERR_SHAPE);
    assert_string_equal(ts_last_error(),
                        "cannot reshape [30, 200, 1536] to [30, 200, 7, 219]: 9216000 elements vs 9198000");
    assert_int_equal(ts_tensor_reshape(&r, &t, 4, (int64_t[]){30, 200, 7, -1}), TS_ERR_SHAPE);
    assert_non_null(strstr(ts_last_error(), "do not divide by 42000"));
    assert_int_equal(ts_tensor_reshape(&r, &t, 2, (int64_t[]){-1, -1}), TS_ERR_SHAPE);
}

static void reshape_after_permute_needs_contiguous(void **state) {
    (void)state;
    /* qkv (B=2, S=3, 4) -> permute (B, 4, S): merging the last two dims is not
     * a view, exactly as x.permute(0,2,1).view(2, 12) fails in PyTorch. */
    ts_tensor t = make(3, (int64_t[]){2, 3, 4}), p, r;
    assert_ok(ts_tensor_permute(&p, &t, (int[]){0, 2, 1}));
    assert_false(ts_tensor_is_contiguous(&p));
    assert_int_equal(ts_tensor_reshape(&r, &p, 2, (int64_t[]){2, 12}), TS_ERR_SHAPE);
    assert_non_null(strstr(ts_last_error(), "contiguous"));
    /* Splitting a dim of a permuted tensor is still a view. */
    assert_ok(ts_tensor_reshape(&r, &p, 4, (int64_t[]){2, 2, 2, 3}));
    assert_float_equal(ts_tensor_get(&r, (int64_t[]){1, 1, 0, 2}), ts_tensor_get(&p, (int64_t[]){1, 2, 2}), 0);
}

static void permute_then_contiguous(void **state) {
    (void)state;
    ts_arena arena;
    assert_ok(ts_arena_init(&arena, 1 << 12));
    ts_tensor t = make(3, (int64_t[]){2, 3, 4}), p, c;
    assert_ok(ts_tensor_permute(&p, &t, (int[]){2, 0, -2}));
    assert_shape(&p, 4, 2, 3);
    assert_ok(ts_tensor_contiguous(&c, &p, &arena));
    assert_true(ts_tensor_is_contiguous(&c));
    assert_ptr_not_equal(c.data, t.data);
    /* torch.arange(24).view(2,3,4).permute(2,0,1).flatten()[:8] */
    const float want[] = {0, 4, 8, 12, 16, 20, 1, 5};
    assert_floats_close(c.data, want, 8, 0);
    for (int64_t i = 0; i < 4; i++)
        for (int64_t j = 0; j < 2; j++)
            for (int64_t k = 0; k < 3; k++)
                assert_float_equal(ts_tensor_get(&c, (int64_t[]){i, j, k}), (float)(j * 12 + k * 4 + i), 0);
    /* A contiguous tensor comes back as itself. */
    ts_tensor same;
    assert_ok(ts_tensor_contiguous(&same, &t, &arena));
    assert_ptr_equal(same.data, t.data);
    ts_arena_free(&arena);
}

static void transpose_swaps_two_dims(void **state) {
    (void)state;
    ts_tensor t = make(3, (int64_t[]){2, 3, 4}), tr;
    assert_ok(ts_tensor_transpose(&tr, &t, -1, -2));
    assert_shape(&tr, 2, 4, 3);
    assert_float_equal(ts_tensor_get(&tr, (int64_t[]){1, 3, 2}), 23.0f, 0);
    assert_int_equal(ts_tensor_transpose(&tr, &t, 0, 3), TS_ERR_SHAPE);
    assert_non_null(strstr(ts_last_error(), "out of range"));
}

static void chunk_splits_like_torch(void **state) {
    (void)state;
    /* (2, 3, 12).chunk(3, dim=-1): three (2, 3, 4) views, as q, k, v. */
    ts_tensor t = make(3, (int64_t[]){2, 3, 4}), qkv, parts[3];
    assert_ok(ts_tensor_reshape(&qkv, &t, 3, (int64_t[]){2, 1, 12}));
    int n = 0;
    assert_ok(ts_tensor_chunk(parts, &n, &qkv, 3, -1));
    assert_int_equal(n, 3);
    for (int i = 0; i < 3; i++) {
        assert_shape(&parts[i], 2, 1, 4);
        assert_float_equal(ts_tensor_get(&parts[i], (int64_t[]){1, 0, 0}), (float)(12 + 4 * i), 0);
    }
    /* 5 rows in 3 chunks: 2, 2, 1 as torch.chunk gives. */
    ts_tensor rows = make(2, (int64_t[]){5, 4}), pieces[3];
    assert_ok(ts_tensor_chunk(pieces, &n, &rows, 3, 0));
    assert_int_equal(n, 3);
    assert_int_equal(pieces[0].shape[0], 2);
    assert_int_equal(pieces[2].shape[0], 1);
    assert_float_equal(pieces[2].data[0], 16.0f, 0);
}

static void slice_bounds_are_checked(void **state) {
    (void)state;
    ts_tensor t = make(2, (int64_t[]){6, 4}), s;
    assert_ok(ts_tensor_slice(&s, &t, 0, 2, 3));
    assert_shape(&s, 3, 4);
    assert_float_equal(s.data[0], 8.0f, 0);
    assert_int_equal(ts_tensor_slice(&s, &t, 0, 4, 3), TS_ERR_SHAPE);
    assert_non_null(strstr(ts_last_error(), "outside [6, 4]"));
}

static void shape_text_in_both_styles(void **state) {
    (void)state;
    char buf[TS_SHAPE_TEXT_MAX];
    const int64_t shape[] = {30, 200, 512};
    assert_string_equal(ts_shape_format(buf, sizeof buf, 3, shape, TS_SHAPE_PLAIN), "[30, 200, 512]");
    assert_string_equal(ts_shape_format(buf, sizeof buf, 3, shape, TS_SHAPE_TORCH),
                        "torch.Size([30, 200, 512])");
    assert_string_equal(ts_shape_format(buf, sizeof buf, 0, shape, TS_SHAPE_TORCH), "torch.Size([])");
    /* A short buffer is cut, never overrun. */
    char tiny[6];
    ts_shape_format(tiny, sizeof tiny, 3, shape, TS_SHAPE_PLAIN);
    assert_true(strlen(tiny) < sizeof tiny);
}

static void arena_aligns_and_runs_out(void **state) {
    (void)state;
    ts_arena arena;
    assert_ok(ts_arena_init(&arena, 256));
    void *a = ts_arena_alloc(&arena, 4);
    void *b = ts_arena_alloc(&arena, 100);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal((uintptr_t)b % TS_ARENA_ALIGN, 0);
    size_t mark = ts_arena_mark(&arena);
    assert_null(ts_arena_alloc(&arena, 1000));
    assert_non_null(strstr(ts_last_error(), "arena exhausted"));
    ts_arena_reset(&arena, mark);
    assert_int_equal(arena.peak, 64 + 128);
    ts_arena_free(&arena);
}

static void layer_names_parse_whole_components(void **state) {
    (void)state;
    assert_int_equal(ts_name_layer("encoder.layers.3.self_attn.q"), 3);
    assert_int_equal(ts_name_layer("layers.12"), 12);
    assert_int_equal(ts_name_layer("embed.out"), -1);
    assert_int_equal(ts_name_layer("encoder.layers.*.out"), -1);
    assert_int_equal(ts_name_layer("mylayers.2.out"), -1);   /* not a whole component */
    assert_int_equal(ts_name_layer("encoder.layers.2x.out"), -1);
    assert_int_equal((int)ts_name_layer_prefix("decoder.layers.10.cross_attn.k"), (int)strlen("decoder.layers.10"));
    assert_int_equal((int)ts_name_layer_prefix("logits"), 0);
    char buf[64];
    assert_true(ts_name_with_layer(buf, sizeof buf, "encoder.layers.3.out", 11));
    assert_string_equal(buf, "encoder.layers.11.out");
    assert_true(ts_name_with_layer(buf, sizeof buf, "encoder.layers.*.norm1.out", 0));
    assert_string_equal(buf, "encoder.layers.0.norm1.out");
    assert_false(ts_name_with_layer(buf, sizeof buf, "embed.pe", 1));
    assert_false(ts_name_with_layer(buf, 8, "encoder.layers.3.out", 1)); /* does not fit */
    const char *rest = NULL;
    assert_int_equal(ts_name_stack_layer("decoder.layers.4.ffn.out", "decoder", &rest), 4);
    assert_string_equal(rest, ".ffn.out");
    assert_int_equal(ts_name_stack_layer("decoder.layers.7", "decoder", &rest), 7);
    assert_string_equal(rest, "");
    assert_int_equal(ts_name_stack_layer("encoder.layers.4.out", "decoder", NULL), -1); /* another stack */
    assert_int_equal(ts_name_stack_layer("decoderx.layers.4.out", "decoder", NULL), -1);
    assert_int_equal(ts_name_stack_layer("decoder.norm.out", "decoder", NULL), -1);
    assert_int_equal(ts_name_stack_layer("decoder.layers.*.out", "decoder", NULL), -1);
    assert_int_equal(ts_name_stack_layer("decoder.layers.2x.out", "decoder", NULL), -1);
    assert_int_equal(ts_name_stack_layer("decoder.x.layers.2.out", "decoder", NULL), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(layer_names_parse_whole_components),
        cmocka_unit_test_setup(reshape_contiguous_is_a_view, setup),
        cmocka_unit_test_setup(reshape_wrong_count_explains, setup),
        cmocka_unit_test_setup(reshape_after_permute_needs_contiguous, setup),
        cmocka_unit_test_setup(permute_then_contiguous, setup),
        cmocka_unit_test_setup(transpose_swaps_two_dims, setup),
        cmocka_unit_test_setup(chunk_splits_like_torch, setup),
        cmocka_unit_test_setup(slice_bounds_are_checked, setup),
        cmocka_unit_test_setup(shape_text_in_both_styles, setup),
        cmocka_unit_test_setup(arena_aligns_and_runs_out, setup),
    };
    return cmocka_run_group_tests_name("tensor", tests, NULL, NULL);
}
