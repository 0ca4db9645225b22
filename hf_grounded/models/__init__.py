from .char_gru import CharGRUConfig, CharGRUModel, CharGRUOutput, CharGRUPreTrainedModel, CharTokenizer, hinge_loss

__all__ = ["CharGRUConfig", "CharGRUModel", "CharGRUOutput", "CharGRUPreTrainedModel", "CharTokenizer", "hinge_loss"]
