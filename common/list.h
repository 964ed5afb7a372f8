/*
 * An intrusive doubly linked list with a sentinel head: the runtime's
 * actors, graphs and DAGs. Not thread-safe: the owner's lock guards it.
 */
#ifndef ADAG_COMMON_LIST_H
#define ADAG_COMMON_LIST_H

#include <stddef.h>

typedef struct adag_list {
    struct adag_list *prev, *next;
} adag_list_t;

/* The struct of type `type` whose member `member` is at ptr. */
#define ADAG_CONTAINER(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

/* An empty list (also: an item in no list, which remove leaves alone). */
static inline void adag__list_init(adag_list_t *l)
{
    l->prev = l->next = l;
}

/* Appends item at the tail of l. */
static inline void adag__list_push(adag_list_t *l, adag_list_t *item)
{
    item->prev = l->prev;
    item->next = l;
    l->prev->next = item;
    l->prev = item;
}

/* Unlinks item from its list; it is then an empty list of its own. */
static inline void adag__list_remove(adag_list_t *item)
{
    item->prev->next = item->next;
    item->next->prev = item->prev;
    item->prev = item->next = item;
}

#endif
