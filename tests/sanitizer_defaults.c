/* sanitizer_defaults: settings the sanitizer runtime asks every test binary
 * for (linked into all of them; unused in plain builds).
 *
 * fontconfig leaks a few hundred bytes while it parses its XML config the
 * first time pango asks for a font (inside FcInitLoadConfigAndFonts, on a
 * thread pangoft2 starts): a library bug no caller can free. Only that is
 * suppressed; our own leaks, and pango's or cairo's, are still reported
 * (tests that draw text call ts_render_release_fonts before exiting). */
const char *__lsan_default_suppressions(void);

const char *__lsan_default_suppressions(void) { return "leak:libfontconfig.so\n"; }
