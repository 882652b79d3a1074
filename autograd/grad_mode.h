// Whether ops record autograd history (torch.is_grad_enabled), per thread.
#pragma once

namespace sloth::autograd {

bool is_grad_enabled();
void set_grad_enabled(bool enabled);

}  // namespace sloth::autograd
