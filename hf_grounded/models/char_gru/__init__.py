from .configuration_char_gru import CharGRUConfig
from .modeling_char_gru import CharGRUModel, CharGRUOutput, CharGRUPreTrainedModel, hinge_loss
from .tokenization_char import CharTokenizer

__all__ = ["CharGRUConfig", "CharGRUModel", "CharGRUOutput", "CharGRUPreTrainedModel", "CharTokenizer", "hinge_loss"]
