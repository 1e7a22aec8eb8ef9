/* Links Nereus::c (libnereus_c.so) from an installed Nereus, compiled as C:
 * the C interface's header stands alone in C (stddef.h and stdint.h), and
 * nereus_connect to a coordinator that is not there gives up after
 * startup_timeout_s with a status code and a last-error text naming it.
 * Usage: consumer_c PORT (a port where nobody listens). */
#include <stdio.h>
#include <string.h>

#include "nereus/c_api.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: consumer_c PORT\n");
    return 2;
  }
  char coordinator[64];
  snprintf(coordinator, sizeof(coordinator), "127.0.0.1:%s", argv[1]);
  if (nereus_c_api_version() != NEREUS_C_API_VERSION) {
    fprintf(stderr, "FAIL: library version %d, header %d\n", nereus_c_api_version(), NEREUS_C_API_VERSION);
    return 1;
  }
  nereus_options_t* options = nereus_options_create();
  if (nereus_options_set(options, "coordinator", coordinator) != NEREUS_OK ||
      nereus_options_set(options, "startup_timeout_s", "1") != NEREUS_OK) {
    fprintf(stderr, "FAIL: setting options: %s\n", nereus_last_error());
    return 1;
  }
  nereus_client_t* client = NULL;
  const int code = nereus_connect(options, &client);
  nereus_options_destroy(options);
  if (code == NEREUS_OK || client != NULL) {
    fprintf(stderr, "FAIL: nereus_connect to %s succeeded with nobody there\n", coordinator);
    nereus_client_destroy(client);
    return 1;
  }
  if (strstr(nereus_last_error(), coordinator) == NULL) {
    fprintf(stderr, "FAIL: the error does not name %s: %s\n", coordinator, nereus_last_error());
    return 1;
  }
  printf("OK: nereus_connect failed as expected: %s: %s\n", nereus_status_name(code), nereus_last_error());
  return 0;
}
