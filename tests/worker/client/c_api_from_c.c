/* c_api_test's check that nereus/c_api.h compiles as C (this file is built
 * by the C compiler, -std=c11 -Wall -Wextra) and that its calls behave from
 * C: the options and solver setters, a tensor description, the error text.
 * Returns 0, or 1 with what went wrong in `error`. */
#include <stdio.h>
#include <string.h>

#include "nereus/c_api.h"

int nereus_c_api_from_c(char* error, size_t error_size);

int nereus_c_api_from_c(char* error, size_t error_size) {
  int ok = 1;
  nereus_options_t* options = nereus_options_create();
  nereus_solver_t* solver = nereus_solver_create();
  const int64_t shape[2] = {500, 800};
  nereus_tensor_t* tensor = nereus_tensor_create("fc1.weight", shape, 2);
  nereus_tensor_set_mults(tensor, 2.0f, 0.0f);
  if (nereus_options_set(options, "schedule", "priority") != NEREUS_OK ||
      nereus_solver_set(solver, "momentum", "0.9") != NEREUS_OK) {
    snprintf(error, error_size, "a valid setting was refused: %s", nereus_last_error());
    ok = 0;
  } else if (nereus_options_set(options, "sfb", "maybe") != NEREUS_INVALID_ARGUMENT ||
             strcmp(nereus_last_error(), "nereus_options_set: sfb must be auto, on or off, got \"maybe\"") != 0) {
    snprintf(error, error_size, "a bad sfb value gave: %s", nereus_last_error());
    ok = 0;
  } else if (nereus_monotonic_us() <= 0) {
    snprintf(error, error_size, "nereus_monotonic_us is not positive");
    ok = 0;
  }
  nereus_tensor_destroy(tensor);
  nereus_solver_destroy(solver);
  nereus_options_destroy(options);
  return ok ? 0 : 1;
}
