/* The frames' JSON: a strict parser for what the host sends (objects, arrays, strings, numbers,
 * true, false, null; NaN and Infinity as Python writes them) and an ASCII string writer.
 *
 * Strings come back as bytes: \uXXXX escapes become UTF-8, except lone surrogates U+DC80 to
 * U+DCFF, which become the raw bytes 0x80 to 0xFF: the host's JSON carries non-UTF-8 argv,
 * environment and paths that way (Python's surrogateescape), and the kernel wants the bytes.
 */
#include "helper.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *p, *end;
    int depth;
} Parser;

static Json *parse_value(Parser *ps);

static void skip_ws(Parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static int literal(Parser *ps, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) return 0;
    ps->p += n;
    return 1;
}

static int hex4(Parser *ps, unsigned *out) {
    if (ps->end - ps->p < 4) return 0;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = ps->p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return 0;
    }
    ps->p += 4;
    *out = v;
    return 1;
}

static void put_utf8(Buf *b, unsigned cp) {
    char s[4];
    size_t n;
    if (cp < 0x80) {
        s[0] = (char)cp, n = 1;
    } else if (cp < 0x800) {
        s[0] = (char)(0xC0 | (cp >> 6)), s[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
    } else if (cp < 0x10000) {
        s[0] = (char)(0xE0 | (cp >> 12)), s[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        s[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
    } else {
        s[0] = (char)(0xF0 | (cp >> 18)), s[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        s[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), s[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
    }
    buf_add(b, s, n);
}

static int parse_string(Parser *ps, Buf *out) {
    ps->p++; /* the opening quote */
    while (ps->p < ps->end) {
        unsigned char c = (unsigned char)*ps->p++;
        if (c == '"') {
            buf_add(out, "", 0);
            return 1;
        }
        if (c < 0x20) return 0;
        if (c != '\\') {
            buf_add(out, &c, 1);
            continue;
        }
        if (ps->p >= ps->end) return 0;
        char e = *ps->p++;
        unsigned cp;
        switch (e) {
        case '"': buf_add(out, "\"", 1); break;
        case '\\': buf_add(out, "\\", 1); break;
        case '/': buf_add(out, "/", 1); break;
        case 'b': buf_add(out, "\b", 1); break;
        case 'f': buf_add(out, "\f", 1); break;
        case 'n': buf_add(out, "\n", 1); break;
        case 'r': buf_add(out, "\r", 1); break;
        case 't': buf_add(out, "\t", 1); break;
        case 'u':
            if (!hex4(ps, &cp)) return 0;
            if (cp >= 0xD800 && cp < 0xDC00 && ps->end - ps->p >= 6 && ps->p[0] == '\\' &&
                ps->p[1] == 'u') {
                Parser peek = *ps;
                unsigned low;
                peek.p += 2;
                if (hex4(&peek, &low) && low >= 0xDC00 && low < 0xE000) {
                    *ps = peek;
                    put_utf8(out, 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00));
                    break;
                }
            }
            if (cp >= 0xDC80 && cp <= 0xDCFF) {
                unsigned char raw = (unsigned char)(cp - 0xDC00);
                buf_add(out, &raw, 1);
            } else {
                put_utf8(out, cp);
            }
            break;
        default: return 0;
        }
    }
    return 0;
}

static Json *new_value(JType type) {
    Json *v = xcalloc(1, sizeof *v);
    v->type = type;
    return v;
}

static Json *parse_number(Parser *ps) {
    const char *start = ps->p;
    int integral = 1;
    if (ps->p < ps->end && *ps->p == '-') ps->p++;
    while (ps->p < ps->end) {
        char c = *ps->p;
        if (c >= '0' && c <= '9') {
            ps->p++;
        } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
            integral = 0;
            ps->p++;
        } else {
            break;
        }
    }
    if (ps->p == start) return NULL;
    char tmp[64];
    size_t n = (size_t)(ps->p - start);
    if (n >= sizeof tmp) return NULL;
    memcpy(tmp, start, n);
    tmp[n] = 0;
    char *end;
    Json *v = new_value(J_NUM);
    v->number = strtod(tmp, &end);
    if (*end) {
        free(v);
        return NULL;
    }
    if (integral) {
        v->is_int = 1;
        v->integer = strtoll(tmp, NULL, 10);
    }
    return v;
}

static Json *parse_container(Parser *ps, int object) {
    Json *v = new_value(object ? J_OBJ : J_ARR);
    size_t cap = 0;
    char close = object ? '}' : ']';
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        return v;
    }
    for (;;) {
        Buf key = {0};
        skip_ws(ps);
        if (object) {
            if (ps->p >= ps->end || *ps->p != '"' || !parse_string(ps, &key)) goto fail;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p++ != ':') {
                buf_free(&key);
                goto fail;
            }
        }
        Json *item = parse_value(ps);
        if (!item) {
            buf_free(&key);
            goto fail;
        }
        if (v->len == cap) {
            cap = cap ? cap * 2 : 8;
            v->items = realloc(v->items, cap * sizeof *v->items);
            if (object) {
                v->keys = realloc(v->keys, cap * sizeof *v->keys);
                v->key_lens = realloc(v->key_lens, cap * sizeof *v->key_lens);
            }
            if (!v->items || (object && (!v->keys || !v->key_lens))) xmalloc((size_t)-1);
        }
        if (object) {
            v->keys[v->len] = key.data;
            v->key_lens[v->len] = key.len;
        }
        v->items[v->len++] = item;
        skip_ws(ps);
        if (ps->p >= ps->end) goto fail;
        char c = *ps->p++;
        if (c == close) return v;
        if (c != ',') goto fail;
    }
fail:
    json_free(v);
    return NULL;
}

static Json *parse_value(Parser *ps) {
    skip_ws(ps);
    if (ps->p >= ps->end || ++ps->depth > 64) return NULL;
    Json *v = NULL;
    char c = *ps->p;
    if (c == '{' || c == '[') {
        v = parse_container(ps, c == '{');
    } else if (c == '"') {
        Buf s = {0};
        if (parse_string(ps, &s)) {
            v = new_value(J_STR);
            v->str = s.data;
            v->len = s.len;
        } else {
            buf_free(&s);
        }
    } else if (literal(ps, "null")) {
        v = new_value(J_NULL);
    } else if (literal(ps, "true") || literal(ps, "false")) {
        v = new_value(J_BOOL);
        v->boolean = ps->p[-1] == 'e' && ps->p[-2] == 'u';
    } else if (literal(ps, "NaN")) {
        v = new_value(J_NUM);
        v->number = NAN;
    } else if (literal(ps, "Infinity")) {
        v = new_value(J_NUM);
        v->number = INFINITY;
    } else if (literal(ps, "-Infinity")) {
        v = new_value(J_NUM);
        v->number = -INFINITY;
    } else {
        v = parse_number(ps);
    }
    ps->depth--;
    return v;
}

Json *json_parse(const char *text, size_t len) {
    Parser ps = {text, text + len, 0};
    Json *v = parse_value(&ps);
    skip_ws(&ps);
    if (v && ps.p != ps.end) {
        json_free(v);
        return NULL;
    }
    return v;
}

void json_free(Json *v) {
    if (!v) return;
    if (v->type == J_ARR || v->type == J_OBJ) {
        for (size_t i = 0; i < v->len; i++) {
            json_free(v->items[i]);
            if (v->keys) free(v->keys[i]);
        }
        free(v->items);
        free(v->keys);
        free(v->key_lens);
    }
    free(v->str);
    free(v);
}

Json *json_get(const Json *object, const char *key) {
    if (!object || object->type != J_OBJ) return NULL;
    size_t n = strlen(key);
    for (size_t i = object->len; i-- > 0;) /* the last of duplicate keys, as Python's */
        if (object->key_lens[i] == n && memcmp(object->keys[i], key, n) == 0)
            return object->items[i];
    return NULL;
}

/* Decode one UTF-8 sequence at s (n bytes left); its code point, or -1 for an invalid byte. */
static long utf8_at(const unsigned char *s, size_t n, size_t *used) {
    unsigned char c = s[0];
    size_t len = c >= 0xF0 && c < 0xF5 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
    if (c >= 0xF5 || len == 0 || len > n) return -1;
    unsigned long cp = c & (0xFF >> (len + 1));
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return -1;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp < 0xE000))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return -1;
    *used = len;
    return (long)cp;
}

void json_quote(Buf *out, const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    buf_add(out, "\"", 1);
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') {
            buf_add(out, &c, 1);
            i++;
            continue;
        }
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            buf_add(out, esc, 2);
            i++;
            continue;
        }
        if (c < 0x80) {
            buf_addf(out, "\\u%04x", c);
            i++;
            continue;
        }
        size_t used;
        long cp = utf8_at(p + i, n - i, &used);
        if (cp < 0) { /* not UTF-8: the byte as a surrogate escape, as Python's */
            buf_addf(out, "\\u%04x", 0xDC00 + c);
            i++;
        } else if (cp >= 0x10000) {
            cp -= 0x10000;
            buf_addf(out, "\\u%04lx\\u%04lx", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
            i += used;
        } else {
            buf_addf(out, "\\u%04lx", cp);
            i += used;
        }
    }
    buf_add(out, "\"", 1);
}
