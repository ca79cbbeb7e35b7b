/* markup.h - what a page shares with the other pages of its site: a
 * 64-bit simhash of its tags (names and attributes: the template's
 * menus, class names, style sheet and script links), where near/simhash.h
 * hashes its text. Two pages of one template differ in few bits however
 * different their text; the delta step picks the pages of its window to
 * try a page on by it (ndelta.h).
 *
 * Each distinct start tag, from its '<' to its '>' (at most
 * MARKUP_TAG_BYTES of it, so that a long inline attribute counts once),
 * is hashed with XXH3-64 and added to the simhash with weight 1: once,
 * however often it repeats (else the commonest tags of HTML decide every
 * bit); end tags, comments, a script's or a style's body are not counted.
 * A page with no tag (plain text, binary) has the simhash 0. */
#ifndef PD_MARKUP_H
#define PD_MARKUP_H

#include <stddef.h>
#include <stdint.h>

#define MARKUP_TAG_BYTES 64

uint64_t markup_simhash(const void *buf, size_t len);

#endif
