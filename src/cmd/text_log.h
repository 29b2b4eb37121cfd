/* text_log: TSCOPE_CLIPS=error and TSCOPE_TEXT_LOG=FILE, how drawing commands report their text (text_log.c). */
#ifndef TSCOPE_CMD_TEXT_LOG_H
#define TSCOPE_CMD_TEXT_LOG_H

void ts_text_log_begin(void); /* from the environment; nothing when unset */
void ts_text_log_end(void);

#endif
