/* The built-in channel backends' indices in the registry
 * (transport/channel.c), for tests that open an endpoint of one by hand;
 * chan.registry_names_the_built_in_backends checks each against its name. */
#ifndef ADAG_TESTS_CHAN_INDEX_H
#define ADAG_TESTS_CHAN_INDEX_H

enum { CHAN_SELF, CHAN_SHM, CHAN_DEVICE, CHAN_UCX, CHAN_NBUILTIN };

#endif
